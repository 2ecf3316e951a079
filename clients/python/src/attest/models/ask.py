"""Grounded answers: ``POST /v1/collections/{name}/ask`` and its Server-Sent Events."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field

from ._base import ApiModel, RequestModel

Verdict = Literal["supported", "partial", "unsupported"]
#: ``answered``: grounded and cited; ``abstained``: no grounded answer (see ``reason``); ``out_of_corpus``: a
#: general-knowledge answer of the configured LLM, never grounded, with a ``disclaimer``.
Status = Literal["answered", "abstained", "out_of_corpus"]

_MARKER = re.compile(r"\s*\[\d+\]")


class Turn(RequestModel):
    """An earlier turn of the conversation: ``role`` is ``user`` or ``assistant``."""

    role: str
    content: str


class AskRequest(RequestModel):
    """Body of an ask."""

    question: str
    history: list[Turn] | None = None
    tenant: str | None = None
    stream: bool | None = None


class Citation(ApiModel):
    """Footnote ``[n]`` of the answer: the chunk it cites and the quoted sentence the answer relies on."""

    n: int
    chunk_id: str
    doc_id: str
    title: str = ""
    quote: str = ""
    score: float = 0.0


class Claim(ApiModel):
    """An atomic claim of the answer, the footnotes it cites and the verifier's verdict on it."""

    text: str
    citations: list[int] = Field(default_factory=list)
    support: float = 0.0
    supported: bool = False
    verdict: Verdict


class NearMissSource(ApiModel):
    """The passage a near miss points at, with its sentence closest to the question."""

    chunk_id: str
    doc_id: str
    title: str = ""
    quote: str = ""


class NearMiss(ApiModel):
    """Of an abstention: what the documents state instead — a suggestion, never an answer.

    ``kind``: ``sibling`` (the fact is given for a look-alike, ``found``, not for ``asked``) or ``not_stated``
    (the documents name ``asked`` but no passage found states what was asked); ``message`` says it in one sentence.
    """

    kind: str
    asked: str
    found: str
    message: str
    source: NearMissSource


class Verdicts(ApiModel):
    """How many claims got each verdict (kept and dropped)."""

    supported: int = 0
    partial: int = 0
    unsupported: int = 0


class Terminology(ApiModel):
    """The glossary lookup of a definition question (``outcome``: hit, ambiguous, miss, no_glossary, timeout)."""

    term: str
    outcome: str
    matches: list[dict[str, Any]] = Field(default_factory=list)
    cached: bool = False


class AskResponse(ApiModel):
    """A grounded answer, or an abstention with its reason and suggestions.

    ``answer`` carries ``[n]`` markers resolved by ``citations``; every kept claim was judged by the verifier
    (``claims[].verdict``, tallied in ``verdicts``). ``degraded``: some shards were not searched;
    ``fallback_mode``: the embedder failed, BM25 alone answered (confidence reduced).
    """

    status: Status
    answer: str = ""
    citations: list[Citation] = Field(default_factory=list)
    claims: list[Claim] = Field(default_factory=list)
    dropped_claims: list[Claim] = Field(default_factory=list)
    verdicts: Verdicts = Field(default_factory=Verdicts)
    rewritten_question: str | None = None
    disclaimer: str | None = None
    confidence: float = 0.0
    reason: str | None = None
    suggestions: list[str] = Field(default_factory=list)
    near_miss: NearMiss | None = None
    fallback_mode: bool = False
    degraded: bool = False
    request_id: str | None = None
    hops: int | None = None
    generator: str | None = None
    route: str | None = None
    terminology: Terminology | None = None
    unverified_terminology: bool = False
    notes: list[str] = Field(default_factory=list)
    identifiers: list[str] = Field(default_factory=list)
    pinned: list[str] = Field(default_factory=list)
    reranker: str | None = None
    latency_ms: dict[str, float] = Field(default_factory=dict)

    @property
    def answered(self) -> bool:
        """A grounded, cited answer (not an abstention, not an out-of-corpus answer)."""
        return self.status == "answered"

    @property
    def abstained(self) -> bool:
        """Attest declined to answer; ``reason`` says why and ``suggestions`` what to ask instead."""
        return self.status == "abstained"

    @property
    def verdict(self) -> Verdict | None:
        """The answer's verdict: as strong as its weakest kept claim (``None`` without claims)."""
        order = {"unsupported": 0, "partial": 1, "supported": 2}
        return min((c.verdict for c in self.claims), key=order.__getitem__, default=None)

    def citation(self, n: int) -> Citation | None:
        """The citation of footnote ``[n]``."""
        return next((c for c in self.citations if c.n == n), None)

    def plain_answer(self) -> str:
        """The answer without its ``[n]`` markers."""
        return _MARKER.sub("", self.answer).strip()


class AskDelta(ApiModel):
    """One ``delta`` event of a streamed answer: a verified claim, its footnotes and verdict."""

    text: str
    citations: list[int] = Field(default_factory=list)
    verdict: Verdict | None = None


class Retrieved(ApiModel):
    """A passage of a streamed ask's first retrieval, ranked but not yet read."""

    chunk_id: str
    doc_id: str
    title: str = ""
    score: float = 0.0


class AskSources(ApiModel):
    """The ``sources`` event of a streamed answer: the first retrieval's passages, best first, sent before they
    are read (most of a turn is reading and verifying)."""

    sources: list[Retrieved] = Field(default_factory=list)
