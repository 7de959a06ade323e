"""A dataset's health report: the gates of every task run in batch on the docker backend (oracle passes, nop
fails, the hack probes stay low, the verifier cannot be written by the agent, no truth in the agent's image,
no answer in a file name), one verdict per task: healthy, broken or not runnable here, with the reason.

The parts: verifier (what a Harbor verifier reads and runs, its probes and the static findings; pure), runner
(the rollouts and the gates' verdicts; no Django) and the Django glue (`packs.services.health`: the stored
report an import starts, its job and page; `manage.py check_dataset`)."""
