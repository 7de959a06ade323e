"""The judge labelling queue's cards: one per distinct (task, check, criterion, text the judge read).

Five oracle rollouts that all answered the same, graded by three judged checks, were 15 cards, and a verdict on
one copy left the other four waiting. A human's verdict is on whether the criterion is met by that text, which
is the same for every copy, so a card holds every copy and its verdict labels each of them (one JudgeLabel per
CheckResult, as grading.services.judge_label_record stores them). What each copy's judge said is counted on the
card, since copies may have been judged differently.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LabelCard:
    items: list = field(default_factory=list)  # review.selectors.unlabelled_judgements items, oldest first

    @property
    def first(self):
        return self.items[0]

    @property
    def count(self) -> int:
        return len(self.items)

    @property
    def judged_met(self) -> int:
        return sum(1 for item in self.items if item.judge_met)

    @property
    def judged_not_met(self) -> int:
        return self.count - self.judged_met

    @property
    def ids(self) -> str:
        return " ".join(str(item.pk) for item in self.items)


def _text_known(item) -> bool:
    """Whether the text the judge read is known: a rollout's (its answer or file), or a grade that kept its answer.
    A grade with neither shows an empty text that says nothing of what was judged: it is never grouped."""
    return item.grade.rollout_id is not None or "answer" in (item.grade.document or {})


def label_cards(items) -> list[LabelCard]:
    """`items` grouped into cards, in the order of each card's oldest item."""
    cards: dict = {}
    for item in items:
        key = (
            (
                item.grade.task_version.task_id if item.grade.task_version else None,
                item.check_id,
                item.criterion,
                item.target,
                item.graded_text,
            )
            if _text_known(item)
            else ("alone", item.pk)
        )
        cards.setdefault(key, LabelCard()).items.append(item)
    return list(cards.values())
