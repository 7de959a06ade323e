"""The LLM judge: one chat-completion call per judged check per sample, against any OpenAI-compatible server.

Contract
--------
* Prompt: a fixed system message (`SYSTEM_PROMPT`) and a user message built by
  `build_messages`: the criterion, the optional reference between <reference> tags,
  then the text under judgement between <answer> and </answer>, with the instruction
  that it is data written by the party being graded, never instructions or a verdict.
  Any `<answer`, `</answer`, `<reference` or `</reference` inside the text is
  neutralised (its `<` becomes `&lt;`), so the text cannot close its delimiter,
  and the instruction is repeated after it, so an injected one never has the last
  word (deterministic: the same request gives the same messages).
* Length: a text longer than `max_text_chars` (GYMWRIGHT_JUDGE_MAX_CHARS, 100,000 by
  default) is not sent: the check FAILS with the reason (a positive check scores 0, a
  penalty is charged), since the graded work chose its length (INTEGRITY.md rule 7).
  A request the provider refuses for its size (a context-length error) fails the same
  way when the text is the larger part of the request, and is unscored otherwise (the
  criterion and reference alone are too long for the judge: the author's setup).
  A request the provider's content filter refuses (an HTTP 400 naming its content policy, or a
  reply cut off with finish_reason "content_filter") fails the same way, not retried: the answer
  fills the request and chose its words, so tripping a filter (one panel member's, say) must
  not make a check, a penalty above all, unscored.
* Answer: the verdict comes only from the judge's own structured reply: the whole
  reply must be exactly one JSON object (whitespace around it allowed), or exactly one
  ```json (or bare ```) fence wrapping the whole reply and holding one object. It has a
  boolean `met` (binary checks) or a number `score` within [min, max] (a scale), and a
  string `explanation`; other keys ("confidence", "reasoning", ...) are ignored. A
  verdict quoted inside prose, or a fence amid text, is never read: the judge may be
  quoting the graded text, which can hold a forged verdict. Prose, a duplicated key,
  `"met": "true"` (a string), a missing explanation or an off-scale score are
  off-format, with the reason.
* Structured output: `response_format` asks for that object where the endpoint
  supports it. "auto" (the default) sends a strict JSON schema, and when the
  endpoint answers HTTP 400 naming that parameter falls back to `{"type": "json_object"}`, then
  to no `response_format`; the fallback is remembered per endpoint (base URL
  and model) for the life of the process. Each endpoint has its own mode (`JudgeEndpoint`). "json_schema", "json_object" and
  "none" pin one mode with no fallback.
* Votes: with `samples` > 1 each sample is its own call. Binary: met when more
  than half the votes say met (a tie is NOT met). Scale: the mean of the
  scores, normalised to [0, 1] by (score − min) / (max − min). If any sample
  fails, the check is unscored: a partial vote is not a verdict.
* Failures: timeouts, HTTP 408, 429, 5xx and connection errors are retried up
  to `max_retries` times with exponential backoff (`backoff_s` × 2^attempt, or
  the server's Retry-After seconds if longer, capped at `backoff_max_s`); the SDK's own retries are off so every attempt is
  counted here. A retry is not started when it could not end within `deadline_s` of the
  sample's first call (its backoff plus `timeout_s`), so a flapping endpoint holds one check
  for at most `deadline_s` (180 s by default), not max_retries × timeout_s.
  `grade_deadline_s` (300 s by default) caps one `judge_many` (all the judge checks of one grade)
  the same way: no call or retry starts after it, so the samples still waiting are unscored with
  the reason, and a grade's judging ends within `grade_deadline_s` + `timeout_s` however many
  checks, samples and retries it has. Cached verdicts are still used after it.
  An off-format reply is asked again `off_format_retries` times (1 by default); still
  off-format, the check is unscored ("the judge's replies were off-format"). A failure
  after the retries, or any other API error, makes the check unscored with the reason:
  the grader's own failure, never a silent 0 or 1.
* Cache: a successful parsed verdict is stored under the sha256 of the
  canonical JSON of {base URL, model, messages, temperature, sample index, max_tokens}, in memory
  and, with `cache_dir`, as one JSON file per key (two providers serving one model name are two
  judges). Re-grading an unchanged answer makes no calls.
* Endpoints: the client calls `config.model` at `config.base_url`, unless the check (or the
  rubric's judge settings) names a judge that `config.endpoints` maps to an endpoint of its own
  (its own base URL, API key, response_format mode and max_tokens: a `JudgeEndpoint`), or that
  `config.models` maps to another model id at `config.base_url` (`endpoints` wins when both do).
  One OpenAI client per distinct (base URL, API key), made on first use.
* Panels: a request with a `panel` (the rubric's `judge.panel`, for a check that names no `model`)
  is asked of every member, each at its own endpoint with its own `samples`, and `combine_panel`
  makes one verdict of theirs. A member name maps through `config.endpoints`, then `config.models`;
  an unmapped one is called as a model id at `base_url`, unless `config.models_only` (the app:
  only configured judge endpoints), when that member gives no verdict. Binary: met when more than half of the WHOLE panel says met (a tie is
  not met); a member with no verdict (its calls failed, it is not configured) is a missing vote,
  and the check is scored only when no way the missing votes could fall changes the verdict,
  else it is unscored: so no answer gains by making a member fail. Scale: the mean of the
  members' normalised scores; any missing member leaves it unscored (it could move the mean).
  A member that found the text too long for its context fails the check, as a sample does.
  `JudgeResult.panel` records each member's verdict and the disagreement: binary, the share of
  the members that voted who are in the minority; scale, the spread of their normalised scores.
  Each check is judged in a request of its own (one criterion per request), so the order of a
  rubric's criteria cannot sway a verdict.
* Concurrency: at most `config.concurrency` calls in flight, in a thread pool
  (works whether or not the caller runs an event loop).

The prompt and the reading of a reply (`SYSTEM_PROMPT`, `build_messages`, `parse_verdict`) are in
`judge_prompt`; this module is the client around them.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .judge_prompt import (
    JudgeRequest,
    OffFormat,
    build_messages,
    parse_verdict,
    response_format_param,
)

DEFAULT_MAX_TEXT_CHARS = 100_000
MAX_TEXT_CHARS_ENV = "GYMWRIGHT_JUDGE_MAX_CHARS"


def max_text_chars_from_env(environ: dict[str, str] | None = None) -> int:
    """GYMWRIGHT_JUDGE_MAX_CHARS (the longest text sent to the judge), or the default when unset or empty
    (a pack's task.toml passes it as "${GYMWRIGHT_JUDGE_MAX_CHARS:-}"); ValueError naming it when not a
    positive whole number."""
    environ = os.environ if environ is None else environ
    raw = (environ.get(MAX_TEXT_CHARS_ENV) or "").strip()
    if not raw:
        return DEFAULT_MAX_TEXT_CHARS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{MAX_TEXT_CHARS_ENV} must be a positive whole number of characters, not {raw!r}")
    return value


@dataclass(frozen=True)
class JudgeEndpoint:
    """One judge endpoint: where a named judge is called, with what key, and how it is asked for its verdict.

    The API key is never shown (not in repr) and never part of a cache key or a stored verdict."""

    base_url: str
    model: str
    api_key: str = field(default="", repr=False)
    response_format: str = "auto"  # one of RESPONSE_FORMATS
    max_tokens: int | None = 512

    def __post_init__(self) -> None:
        if self.response_format not in RESPONSE_FORMATS:
            raise ValueError(
                f"response_format must be one of {', '.join(RESPONSE_FORMATS)}, not {self.response_format!r}"
            )


@dataclass
class JudgeConfig:
    """Where and how to call the judge.

    `base_url`, `model`, `api_key`, `response_format` and `max_tokens` are the default judge's endpoint.
    A rubric's judge name (a check's `model`, a `judge.panel` member) resolves through `endpoints` first
    (name → `JudgeEndpoint`: a judge at its own address, key, response_format mode and max_tokens; the app
    lists every configured judge endpoint here), then `models` (name → a model id served at `base_url` with the
    default's key and settings: the CLI's and a pack's same-address mapping). An unnamed or unmapped check
    uses the default; an unmapped panel member is called as a model id at `base_url` unless `models_only`."""

    base_url: str
    model: str
    api_key: str = field(default="", repr=False)
    concurrency: int = 16
    timeout_s: float = 60
    max_retries: int = 4
    cache_dir: Path | str | None = None
    backoff_s: float = 0.5
    backoff_max_s: float = 20.0
    # Total time one sample may spend over all its attempts (None: no cap); see the module docstring.
    deadline_s: float | None = 180.0
    # Total time all the judge calls of one grade (one judge_many) may start within (None: no cap).
    grade_deadline_s: float | None = 300.0
    models: dict[str, str] = field(default_factory=dict)
    # Judge names served at endpoints of their own (see the class docstring); wins over `models`.
    endpoints: dict[str, JudgeEndpoint] = field(default_factory=dict)
    max_tokens: int | None = 512
    response_format: str = "auto"  # one of RESPONSE_FORMATS
    # A text longer than this is not sent: the check fails (GYMWRIGHT_JUDGE_MAX_CHARS; see the module docstring).
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS
    # How many times an off-format reply is asked again before the check is unscored.
    off_format_retries: int = 1
    # True: a judge panel's member must be a name in `endpoints` or `models` (the app: configured judge endpoints
    # only);
    # False: an unmapped member name is called as a model id at base_url (the CLI, a pack's grader).
    models_only: bool = False

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: Any) -> JudgeConfig | None:
        """OPENAI_BASE_URL, OPENAI_API_KEY, GYMWRIGHT_JUDGE_MODEL and GYMWRIGHT_JUDGE_MAX_CHARS; None unless a
        base URL and model are set."""
        environ = os.environ if environ is None else environ
        base_url = environ.get("OPENAI_BASE_URL", "").strip()
        model = environ.get("GYMWRIGHT_JUDGE_MODEL", "").strip()
        if not base_url or not model:
            return None
        overrides.setdefault("max_text_chars", max_text_chars_from_env(environ))
        return cls(base_url=base_url, model=model, api_key=environ.get("OPENAI_API_KEY", ""), **overrides)

    def __post_init__(self) -> None:
        if self.response_format not in RESPONSE_FORMATS:
            raise ValueError(
                f"response_format must be one of {', '.join(RESPONSE_FORMATS)}, not {self.response_format!r}"
            )
        if isinstance(self.max_text_chars, bool) or not isinstance(self.max_text_chars, int) or self.max_text_chars < 1:
            raise ValueError(f"max_text_chars must be a positive whole number, not {self.max_text_chars!r}")
        if (
            isinstance(self.off_format_retries, bool)
            or not isinstance(self.off_format_retries, int)
            or self.off_format_retries < 0
        ):
            raise ValueError(f"off_format_retries must be a whole number ≥ 0, not {self.off_format_retries!r}")

    def default_endpoint(self, model: str | None = None) -> JudgeEndpoint:
        """The default judge's endpoint (calling `model` there instead, when given)."""
        return JudgeEndpoint(
            base_url=self.base_url,
            model=model or self.model,
            api_key=self.api_key,
            response_format=self.response_format,
            max_tokens=self.max_tokens,
        )

    def endpoint_for(self, name: str | None) -> JudgeEndpoint:
        """The endpoint a rubric/check model name is called at (the default when unnamed or unmapped)."""
        if name and name in self.endpoints:
            return self.endpoints[name]
        if name and name in self.models:
            return self.default_endpoint(self.models[name])
        return self.default_endpoint()

    def resolve_model(self, name: str | None) -> str:
        """The real model id for a rubric/check model name (the default when unnamed or unmapped)."""
        return self.endpoint_for(name).model

    def models_for(self, rubric: Any) -> tuple[str, ...]:
        """The model ids a rubric document's judged checks call under this config, each once: its checks' own
        models, its panel's configured members, else the rubric's judge."""
        from .models import flat_checks

        rubric = rubric if isinstance(rubric, dict) else {}
        settings = rubric.get("judge") if isinstance(rubric.get("judge"), dict) else {}
        panel = settings.get("panel") if isinstance(settings.get("panel"), list) else []
        found: list[str] = []
        for row in flat_checks(rubric.get("checks")):
            if row.check.get("kind") != "llm_judge":
                continue
            if row.check.get("model"):
                found.append(self.resolve_model(row.check["model"]))
            elif panel:
                found.extend(model for name in panel if isinstance(name, str) and (model := self.panel_model(name)))
            else:
                found.append(self.resolve_model(settings.get("model")))
        return tuple(dict.fromkeys(found))

    def panel_endpoint(self, name: str) -> JudgeEndpoint | None:
        """The endpoint of a judge panel member: mapped by `endpoints` or `models`, else the name itself as a
        model id at `base_url`, or None when `models_only` (it is then no configured judge: that member gives
        no verdict)."""
        if name in self.endpoints or name in self.models:
            return self.endpoint_for(name)
        return None if self.models_only else self.default_endpoint(name)

    def panel_model(self, name: str) -> str | None:
        """The real model id of a judge panel member (see `panel_endpoint`), or None."""
        endpoint = self.panel_endpoint(name)
        return endpoint.model if endpoint is not None else None


@dataclass
class JudgeResult:
    """A judged check's outcome: `score` None means unscored, `explanation` then says why — unless
    `failed`: then the graded text itself could not be judged (too long) and the check fails with
    that reason (goodness 0: a positive check scores 0, a penalty is charged)."""

    score: float | None
    explanation: str
    votes: list = field(default_factory=list)
    calls: int = 0
    cache_hits: int = 0
    duration_ms: int = 0
    failed: bool = False
    # A panel's verdicts: {"models", "verdicts", "disagreement"} (models.PanelVerdicts); None for one judge.
    panel: dict | None = None


# ---------------------------------------------------------------- structured output

RESPONSE_FORMATS = ("auto", "json_schema", "json_object", "none")
# What "auto" tries, in order, when the endpoint answers 400 to the previous one.
_AUTO_ORDER = ("json_schema", "json_object", "none")
# Per endpoint (base URL, model), the mode "auto" settled on in this process.
_settled_formats: dict[tuple[str, str], str] = {}
_settled_lock = threading.Lock()
# A 400 whose message names one of these is about response_format (OpenAI, vLLM, llama.cpp, gateways).
_FORMAT_WORDS = (
    "response_format",
    "response format",
    "json_schema",
    "json_object",
    "structured output",
    "guided",
    "grammar",
)


def cache_key(
    base_url: str, model: str, messages: list[dict], temperature: float, sample: int, max_tokens: int | None
) -> str:
    """sha256 of the canonical JSON of everything that determines a judge call: the endpoint's address with its
    model (one model name at two providers is two judges), never its API key."""
    body = {
        "base_url": base_url,
        "model": model,
        "messages": messages,
        "temperature": temperature,
        "sample": sample,
        "max_tokens": max_tokens,
    }
    return hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    ).hexdigest()


@dataclass
class _Sample:
    vote: bool | float | None = None
    explanation: str = ""
    error: str | None = None
    calls: int = 0
    cached: bool = False
    duration_ms: int = 0
    # the graded text is to blame: the provider refused the request for its size (the text being most of it),
    # or its content filter refused it; the check fails
    text_too_long: bool = False


# A provider's words for a request over the model's context (OpenAI, vLLM, llama.cpp, TGI, gateways).
_CONTEXT_WORDS = (
    "context_length_exceeded",
    "context length",
    "context_length",
    "maximum context",
    "context window",
    "context size",
    "too many tokens",
    "prompt is too long",
    "input is too long",
    "reduce the length",
    "tokens exceed",
    "exceeds the maximum",
    "string too long",
)


# A provider's words for a request its content filter refused (Azure OpenAI, OpenAI-compatible gateways).
_FILTER_WORDS = ("content_filter", "content management policy", "content policy", "responsibleaipolicyviolation")


def filtered_reason(said: str) -> str:
    return (
        f"the judge's content filter refused to read the answer ({said[:200]}); it was not judged and the check fails"
    )


def too_long_reason(length: int, limit: int) -> str:
    return (
        f"the answer is {length:,} characters, over the judge's limit of {limit:,} "
        f"({MAX_TEXT_CHARS_ENV}); it was not sent to the judge and the check fails"
    )


class JudgeClient:
    """Calls the judge model; thread-safe; counts calls (`calls`) and cache hits (`cache_hits`)."""

    def __init__(self, config: JudgeConfig):
        self.config = config
        self.calls = 0
        self.cache_hits = 0
        self._cache: dict[str, dict] = {}
        self._lock = threading.Lock()
        # one OpenAI client per (base URL, API key), made on first use; kept in memory only
        self._clients: dict[tuple[str, str], Any] = {}
        self._cache_dir = Path(config.cache_dir) if config.cache_dir else None

    # ------------------------------------------------------------ plumbing

    def _openai(self, endpoint: JudgeEndpoint | None = None):
        """The OpenAI client of `endpoint`'s (base URL, API key) (the default judge's when None), made once."""
        endpoint = endpoint or self.config.default_endpoint()
        key = (endpoint.base_url, endpoint.api_key)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                import openai

                client = self._clients[key] = openai.OpenAI(
                    base_url=endpoint.base_url,
                    api_key=endpoint.api_key or "not-needed",
                    max_retries=0,
                    timeout=self.config.timeout_s,
                )
            return client

    def close(self) -> None:
        """Close the HTTP connection pools."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def __enter__(self) -> JudgeClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _cache_get(self, key: str) -> dict | None:
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        if self._cache_dir is not None:
            path = self._cache_dir / f"{key}.json"
            try:
                entry = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None
            if isinstance(entry, dict) and "vote" in entry and isinstance(entry.get("explanation"), str):
                with self._lock:
                    self._cache[key] = entry
                return entry
        return None

    def _cache_put(self, key: str, entry: dict) -> None:
        with self._lock:
            self._cache[key] = entry
        if self._cache_dir is not None:
            try:
                self._cache_dir.mkdir(parents=True, exist_ok=True)
                temporary = self._cache_dir / f".{key}.{os.getpid()}.{threading.get_ident()}.tmp"
                temporary.write_text(json.dumps(entry), encoding="utf-8")
                os.replace(temporary, self._cache_dir / f"{key}.json")
            except OSError:
                pass  # a read-only or full disk only costs a repeat call later

    def _retryable(self, exc: Exception) -> bool:
        import openai

        if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError)):
            return True
        return isinstance(exc, openai.APIStatusError) and (exc.status_code >= 500 or exc.status_code == 408)

    def _backoff(self, exc: Exception, attempt: int) -> float:
        """Exponential backoff, or the server's Retry-After (seconds) when it gives one; both capped."""
        delay = self.config.backoff_s * (2**attempt)
        response = getattr(exc, "response", None)
        header = response.headers.get("retry-after") if response is not None else None
        if header:
            try:
                delay = max(delay, float(header))
            except ValueError:
                pass  # an HTTP date: keep the exponential delay
        return min(self.config.backoff_max_s, delay)

    def _describe(self, exc: Exception, endpoint: JudgeEndpoint | None = None) -> str:
        import openai

        if isinstance(exc, openai.APITimeoutError):
            return f"timed out after {self.config.timeout_s:g} s"
        if isinstance(exc, openai.APIConnectionError):
            return f"could not connect to {(endpoint or self.config).base_url}"
        if isinstance(exc, openai.APIStatusError):
            return f"HTTP {exc.status_code}: {str(exc.message)[:200]}"
        return f"{type(exc).__name__}: {str(exc)[:200]}"

    def _context_overflow(self, exc: Exception) -> bool:
        """Did the provider refuse the request for its size (over the model's context)?"""
        import openai

        if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 413, 422):
            return False
        if exc.status_code == 413:
            return True
        said = f"{exc.message} {exc.body}".lower()
        return any(word in said for word in _CONTEXT_WORDS)

    def _content_filtered(self, exc: Exception) -> bool:
        """Did the provider's content filter refuse the request?"""
        import openai

        if not isinstance(exc, openai.APIStatusError) or exc.status_code != 400:
            return False
        said = f"{exc.message} {exc.body}".lower()
        return any(word in said for word in _FILTER_WORDS)

    def _overflow_reason(
        self, request: JudgeRequest, messages: list[dict], exc: Exception, endpoint: JudgeEndpoint | None = None
    ) -> tuple[str, bool]:
        """(reason, whether the graded text is to blame) for a request refused for its size. The text is to
        blame when it is the larger part of the request; otherwise the criterion and reference alone are
        too long for this judge (the author's setup: unscored)."""
        total = sum(len(message["content"]) for message in messages)
        text = len(request.text)
        said = self._describe(exc, endpoint)
        if text > total - text:
            return (
                f"the answer ({text:,} characters) is too long for the judge's context: the provider refused "
                f"the request for its size ({said}); the check fails",
                True,
            )
        return (
            f"the judge's context is too small for this check's criterion and reference: the provider refused "
            f"a request of {total:,} characters, of which the answer is only {text:,} ({said})",
            False,
        )

    def _format_mode(self, endpoint: JudgeEndpoint) -> str:
        if endpoint.response_format != "auto":
            return endpoint.response_format
        with _settled_lock:
            return _settled_formats.get((endpoint.base_url, endpoint.model), _AUTO_ORDER[0])

    def _format_fallback(self, endpoint: JudgeEndpoint, mode: str, exc: Exception) -> str | None:
        """The next mode to try when the endpoint answered 400 to `mode`'s response_format (auto only)."""
        import openai

        if endpoint.response_format != "auto" or mode == "none":
            return None
        if not (isinstance(exc, openai.APIStatusError) and exc.status_code == 400):
            return None
        # Only a 400 about the parameter itself: one for, say, a prompt over the context length
        # must stay an error, not downgrade the endpoint for the rest of the process.
        said = f"{exc.message} {exc.body}".lower()
        if not any(word in said for word in _FORMAT_WORDS):
            return None
        fallback = _AUTO_ORDER[_AUTO_ORDER.index(mode) + 1]
        with _settled_lock:
            key = (endpoint.base_url, endpoint.model)
            settled = _settled_formats.get(key, _AUTO_ORDER[0])
            if _AUTO_ORDER.index(settled) < _AUTO_ORDER.index(fallback):
                _settled_formats[key] = fallback
        return fallback

    def _over_grade_deadline(self, grade_deadline: float | None, *, wait: float = 0.0) -> bool:
        """Would a call started after `wait` more seconds begin past this grade's judge deadline?"""
        return grade_deadline is not None and time.perf_counter() + wait > grade_deadline

    def _grade_deadline_reason(self) -> str:
        return (
            f"not judged: this grade's judge calls ran past their {self.config.grade_deadline_s:g} s "
            f"deadline (grade_deadline_s) before this one could start"
        )

    def _endpoint(self, request: JudgeRequest) -> JudgeEndpoint:
        """Where `request` is called: its model name's endpoint (see `JudgeConfig.endpoint_for`). A request with a
        resolved `model_id` is a panel member's and must come with its endpoint (`_judge_panels` passes it): calling
        that id at the default judge's address would silently ask another server, so it is refused."""
        if request.model_id:
            raise ValueError(
                f"judge request has a resolved model_id {request.model_id!r} but no endpoint: pass the endpoint it "
                "was resolved at (only judge panel members carry a model_id)"
            )
        return self.config.endpoint_for(request.model)

    def _sample(
        self,
        request: JudgeRequest,
        index: int,
        grade_deadline: float | None = None,
        endpoint: JudgeEndpoint | None = None,
    ) -> _Sample:
        started = time.perf_counter()
        endpoint = endpoint or self._endpoint(request)
        model = endpoint.model
        messages = build_messages(request)
        key = cache_key(endpoint.base_url, model, messages, request.temperature, index, endpoint.max_tokens)
        sample = _Sample()
        cached = self._cache_get(key)
        if cached is not None:
            with self._lock:
                self.cache_hits += 1
            sample.vote, sample.explanation, sample.cached = cached["vote"], cached["explanation"], True
            return sample
        client = self._openai(endpoint)
        params: dict[str, Any] = {"model": model, "messages": messages, "temperature": request.temperature}
        if endpoint.max_tokens:
            params["max_tokens"] = endpoint.max_tokens
        mode = self._format_mode(endpoint)
        attempt = 0
        off_format = 0
        if self._over_grade_deadline(grade_deadline):
            sample.error = self._grade_deadline_reason()
            return sample
        while True:
            with self._lock:
                self.calls += 1
            sample.calls += 1
            response_format = response_format_param(mode, request.scale)
            if response_format is None:
                params.pop("response_format", None)
            else:
                params["response_format"] = response_format
            try:
                response = client.chat.completions.create(**params)
                if response.choices and response.choices[0].finish_reason == "content_filter":
                    sample.error, sample.text_too_long = filtered_reason('finish_reason "content_filter"'), True
                    break
                content = response.choices[0].message.content if response.choices else None
                sample.vote, sample.explanation = parse_verdict(content, request.scale)
                self._cache_put(key, {"vote": sample.vote, "explanation": sample.explanation, "model": model})
                break
            except OffFormat as exc:
                if off_format < self.config.off_format_retries and not self._over_grade_deadline(grade_deadline):
                    off_format += 1
                    continue
                replies = off_format + 1
                sample.error = (
                    f"off-format verdict: the judge's replies were off-format ({replies} "
                    f"repl{'y' if replies == 1 else 'ies'}); the last: {exc}"
                )
                break
            except Exception as exc:  # noqa: BLE001 - every API failure becomes a reason
                fallback = self._format_fallback(endpoint, mode, exc)
                if fallback is not None:
                    mode = fallback
                    continue
                if self._context_overflow(exc):
                    sample.error, sample.text_too_long = self._overflow_reason(request, messages, exc, endpoint)
                    break
                if self._content_filtered(exc):
                    sample.error, sample.text_too_long = filtered_reason(self._describe(exc, endpoint)), True
                    break
                past_deadline = past_grade_deadline = False
                if self._retryable(exc) and attempt < self.config.max_retries:
                    backoff = self._backoff(exc, attempt)
                    deadline = self.config.deadline_s
                    past_deadline = deadline is not None and (
                        time.perf_counter() - started + backoff + self.config.timeout_s > deadline
                    )
                    past_grade_deadline = not past_deadline and self._over_grade_deadline(grade_deadline, wait=backoff)
                    if not past_deadline and not past_grade_deadline:
                        time.sleep(backoff)
                        attempt += 1
                        continue
                tries = f" after {attempt + 1} attempt(s)" if self._retryable(exc) else ""
                if past_deadline:
                    tries += f" (no more retries within the judge's {self.config.deadline_s:g} s deadline)"
                if past_grade_deadline:
                    tries += f" (no more retries within the grade's {self.config.grade_deadline_s:g} s judge deadline)"
                sample.error = f"judge call failed{tries}: {self._describe(exc, endpoint)}"
                break
        sample.duration_ms = int((time.perf_counter() - started) * 1000)
        return sample

    # ------------------------------------------------------------ public

    def judge_many(self, requests: list[JudgeRequest]) -> list[JudgeResult]:
        """Judge every request (all samples concurrently, at most `concurrency` in flight), in order.

        A request whose text is over `max_text_chars` is not sent: its result is `failed`."""
        if any(request.panel for request in requests):
            return self._judge_panels(requests)
        return self._judge_flat(requests, [self._endpoint(request) for request in requests])

    def _judge_flat(self, requests: list[JudgeRequest], endpoints: list[JudgeEndpoint]) -> list[JudgeResult]:
        """`judge_many` of requests with no panel, each called at its endpoint (`endpoints`, in order)."""
        limit_chars = self.config.max_text_chars
        results: dict[int, JudgeResult] = {
            position: JudgeResult(None, too_long_reason(len(request.text), limit_chars), failed=True)
            for position, request in enumerate(requests)
            if len(request.text) > limit_chars
        }
        jobs = [
            (position, index)
            for position, request in enumerate(requests)
            if position not in results
            for index in range(request.samples)
        ]
        if not jobs:
            return [results[position] for position in range(len(requests))]
        # the SDK's import and the clients' set-up are not judge time: the grade's deadline starts after them
        for endpoint in dict.fromkeys(endpoints[position] for position, _ in jobs):
            self._openai(endpoint)
        limit = self.config.grade_deadline_s
        grade_deadline = None if limit is None else time.perf_counter() + limit
        workers = max(1, min(self.config.concurrency, len(jobs)))
        if workers == 1:
            samples = [
                self._sample(requests[position], index, grade_deadline, endpoints[position]) for position, index in jobs
            ]
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="judge") as pool:
                samples = list(
                    pool.map(
                        lambda job: self._sample(requests[job[0]], job[1], grade_deadline, endpoints[job[0]]), jobs
                    )
                )
        grouped: dict[int, list[_Sample]] = {}
        for (position, _), sample in zip(jobs, samples):
            grouped.setdefault(position, []).append(sample)
        return [
            results[position] if position in results else combine(request, grouped[position])
            for position, request in enumerate(requests)
        ]

    def judge(self, request: JudgeRequest) -> JudgeResult:
        """Judge one request."""
        return self.judge_many([request])[0]

    def _judge_panels(self, requests: list[JudgeRequest]) -> list[JudgeResult]:
        """`judge_many` with panels: each panel request becomes one request per member (all judged together,
        under one grade deadline), then `combine_panel` makes each panel's verdict of its members'."""
        flat: list[JudgeRequest] = []
        endpoints: list[JudgeEndpoint] = []
        plan: list[list[int | str] | int] = []  # per request: its flat index, or per member a flat index or why not
        for request in requests:
            if not request.panel:
                plan.append(len(flat))
                flat.append(request)
                endpoints.append(self._endpoint(request))
                continue
            members: list[int | str] = []
            for name in request.panel:
                endpoint = self.config.panel_endpoint(name)
                if endpoint is None:
                    members.append(f"{name!r} is not a judge endpoint configured for this grader (judge.panel)")
                    continue
                members.append(len(flat))
                flat.append(replace(request, panel=(), model=name, model_id=endpoint.model))
                endpoints.append(endpoint)
            plan.append(members)
        judged = self._judge_flat(flat, endpoints) if flat else []
        out: list[JudgeResult] = []
        for request, entry in zip(requests, plan):
            if isinstance(entry, int):
                out.append(judged[entry])
                continue
            members_results = [judged[item] if isinstance(item, int) else JudgeResult(None, item) for item in entry]
            out.append(combine_panel(request, members_results))
        return out


def combine(request: JudgeRequest, samples: list[_Sample]) -> JudgeResult:
    """Votes → one result (majority for binary, tie = not met; mean normalised score for a scale)."""
    calls = sum(sample.calls for sample in samples)
    hits = sum(1 for sample in samples if sample.cached)
    duration = max((sample.duration_ms for sample in samples), default=0)
    failed = [sample.error for sample in samples if sample.error]
    votes = [sample.vote for sample in samples if sample.error is None]
    too_long = next((sample.error for sample in samples if sample.text_too_long), None)
    if too_long is not None:  # the graded text's own length: the check fails, whatever the other samples said
        return JudgeResult(None, too_long, votes, calls, hits, duration, failed=True)
    if failed:
        prefix = f"{len(failed)} of {len(samples)} samples failed; " if len(samples) > 1 else ""
        return JudgeResult(None, prefix + failed[0], votes, calls, hits, duration)
    first = samples[0].explanation
    if request.scale is None:
        yes = sum(1 for vote in votes if vote)
        met = yes * 2 > len(votes)
        majority = next((sample.explanation for sample in samples if bool(sample.vote) == met), first)
        prefix = f"{yes}/{len(votes)} votes met; " if len(votes) > 1 else ""
        return JudgeResult(1.0 if met else 0.0, prefix + majority, votes, calls, hits, duration)
    low, high = request.scale
    mean = sum(votes) / len(votes)
    score = min(1.0, max(0.0, (mean - low) / (high - low)))
    prefix = (
        f"mean score {mean:g} of {low:g}..{high:g}; " if len(votes) > 1 else f"score {mean:g} of {low:g}..{high:g}; "
    )
    return JudgeResult(score, prefix + first, votes, calls, hits, duration)


def combine_panel(request: JudgeRequest, members: list[JudgeResult]) -> JudgeResult:
    """A judge panel's members' results (in `request.panel`'s order) → one result; see the module docstring.

    A member's result is unscored (score None) when it gave no verdict: a missing vote. The check is scored
    only when the missing votes cannot change the verdict, however they would fall."""
    names = list(request.panel)
    calls = sum(member.calls for member in members)
    hits = sum(member.cache_hits for member in members)
    duration = max((member.duration_ms for member in members), default=0)
    failed = next((member for member in members if member.failed), None)
    if failed is not None:  # the graded text's own length: the check fails, whatever the others said
        verdicts = [None if member.failed else _member_verdict(request, member) for member in members]
        panel = {"models": names, "verdicts": verdicts, "disagreement": None}
        return JudgeResult(None, failed.explanation, [], calls, hits, duration, failed=True, panel=panel)
    verdicts = [_member_verdict(request, member) for member in members]
    cast = [verdict for verdict in verdicts if verdict is not None]
    missing = [(name, member) for name, member in zip(names, members) if member.score is None]
    whole, absent = len(members), len(missing)
    if request.scale is None:
        yes = sum(1 for verdict in cast if verdict)
        no = len(cast) - yes
        disagreement = min(yes, no) / len(cast) if cast else None
        at_least, at_most = yes * 2 > whole, (yes + absent) * 2 > whole  # the missing all say not met / all met
        tally = f"panel {yes} met, {no} not met" + (f", {absent} no verdict" if absent else "") + f" of {whole}"
    else:
        disagreement = (max(cast) - min(cast)) if cast else None
        at_least = at_most = None
        tally = f"panel mean of {len(cast)} of {whole} members"
    panel = {"models": names, "verdicts": verdicts, "disagreement": disagreement}
    # the members' verdicts as votes: met for binary, each member's mean score on the scale for a scale
    votes = (
        cast if request.scale is None else [request.scale[0] + v * (request.scale[1] - request.scale[0]) for v in cast]
    )
    if missing and (request.scale is not None or at_least != at_most):
        reasons = "; ".join(f"{name}: {member.explanation}" for name, member in missing[:3])
        return JudgeResult(
            None,
            f"{tally}: the {absent} missing vote{'s' if absent != 1 else ''} could change the verdict, so it is "
            f"unscored ({reasons})",
            votes,
            calls,
            hits,
            duration,
            panel=panel,
        )
    if request.scale is None:
        met = bool(at_least)
        agreeing = next(
            (
                member.explanation
                for member, verdict in zip(members, verdicts)
                if verdict is not None and verdict == met
            ),
            "",
        )
        note = f" (the missing vote{'s' if absent != 1 else ''} could not change it)" if absent else ""
        return JudgeResult(1.0 if met else 0.0, f"{tally}{note}; {agreeing}", votes, calls, hits, duration, panel=panel)
    low, high = request.scale
    score = sum(cast) / len(cast)
    first = members[0].explanation
    return JudgeResult(
        score,
        f"{tally}: {low + score * (high - low):g} of {low:g}..{high:g}; {first}",
        votes,
        calls,
        hits,
        duration,
        panel=panel,
    )


def _member_verdict(request: JudgeRequest, member: JudgeResult) -> bool | float | None:
    """A panel member's own verdict: met (binary), its normalised score in [0, 1] (scale), or None."""
    if member.score is None or member.failed:
        return None
    return member.score >= 1.0 if request.scale is None else member.score
