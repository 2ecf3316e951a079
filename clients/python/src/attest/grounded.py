"""Text of a grounded answer or of an abstention, for tools and query engines that hand it to an LLM or a user.

An answer is Attest's own text with its ``[n]`` markers, followed by the sources those markers cite. An
abstention is said as one: the reason code and suggestions as Attest gave them, never an answer made up in its
place. An ``out_of_corpus`` answer (a general-knowledge answer of a configured LLM, not grounded in the
collection) is treated as an abstention unless the caller allows it, and then keeps its disclaimer.
"""

from __future__ import annotations

from .models import AskResponse, Citation

#: What each abstention reason code means, in plain words.
REASONS = {
    "no_results": "nothing relevant was found in the collection",
    "low_confidence": "the passages found do not support a confident answer",
    "unsupported_claims": "the drafted answer could not be verified against its sources",
    "terminology_not_found": "the term is not defined in the collection's glossary",
    "model_abstained": "the generator declined to answer from the passages",
    "routed_no_retrieval": "the question does not ask for anything the collection could hold",
    "unresolved_reference": "the question refers to someone it does not name",
    "out_of_corpus": "the collection does not hold the answer",
}


def is_grounded(response: AskResponse, allow_out_of_corpus: bool = False) -> bool:
    """The response carries an answer that may be shown: grounded, or out-of-corpus when allowed."""
    return response.status == "answered" or (allow_out_of_corpus and response.status == "out_of_corpus")


def source_line(c: Citation) -> str:
    """``[n] Title (doc D, chunk C): "quote"``."""
    return f'[{c.n}] {c.title or c.doc_id} (doc {c.doc_id}, chunk {c.chunk_id}): "{c.quote}"'


def abstention_text(response: AskResponse) -> str:
    """What Attest said when it did not answer: the reason (code and meaning) and its suggestions."""
    reason = response.reason or ("out_of_corpus" if response.status == "out_of_corpus" else "unknown")
    meaning = REASONS.get(reason)
    text = f"Attest abstained (reason: {reason}{' — ' + meaning if meaning else ''}): no grounded answer."
    if response.status == "abstained" and response.answer.strip():
        text += f"\n{response.answer.strip()}"
    if response.suggestions:
        text += "\nSuggestions: " + "; ".join(response.suggestions)
    near = response.near_miss
    if response.status == "abstained" and near is not None:
        # A suggestion, not an answer: what the documents state instead, with where it stands.
        text += f'\nFound instead (not an answer): {near.message} "{near.source.quote}" ({near.source.title})'
    return text


def answer_text(response: AskResponse, allow_out_of_corpus: bool = False) -> str:
    """The cited answer followed by its sources, or :func:`abstention_text`."""
    if not is_grounded(response, allow_out_of_corpus):
        return abstention_text(response)
    parts = []
    if response.status == "out_of_corpus" and response.disclaimer:
        parts.append(response.disclaimer)
    parts.append(response.answer.strip())
    if response.citations:
        parts.append("Sources:\n" + "\n".join(source_line(c) for c in response.citations))
    notes = []
    if response.degraded:
        notes.append("part of the collection could not be searched (degraded)")
    if response.fallback_mode:
        notes.append("answered from keyword search alone (fallback mode)")
    if notes:
        parts.append("Note: " + "; ".join(notes) + ".")
    return "\n\n".join(parts)
