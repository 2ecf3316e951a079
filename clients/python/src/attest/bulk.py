"""Bulk document upload in batches, with a progress bar and per-document rejections.

Documents are sent as NDJSON (one line each: the server reports a bad line and ingests the others), at most
``batch_size`` documents or ``max_batch_bytes`` bytes a request. A batch with a precomputed ``vector`` goes as a
JSON body instead (NDJSON lines cannot carry vectors); there one bad document fails the request with a 400 naming
it (``documents[3].colour``), so it is recorded as that document's rejection and the batch is sent again without
it. A batch refused as too large (413) is split in two. Rejections are returned in the :class:`UploadReport`,
each with the document's index in the input and its id; errors that are not about a document (401, 403, 404 ...)
are raised.

The upload is written once, as a generator of calls (:func:`upload_plan`), and driven by the sync and async
clients.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tqdm.auto import tqdm

from ._ops import Call, seg
from .errors import AttestError
from .models import Document, IngestReport, Rejection, UploadReport

DEFAULT_BATCH_SIZE = 500
#: Well under the router's 32 MiB body limit.
DEFAULT_MAX_BATCH_BYTES = 8 * 1024 * 1024
_DOC_FIELD = re.compile(r"^documents\[(\d+)\]")

DocumentLike = Document | Mapping[str, Any]


@dataclass(frozen=True)
class _Item:
    """One document ready to send: its index in the input, its id and its JSON line."""

    index: int
    id: str | None
    line: bytes
    has_vector: bool


@dataclass(frozen=True)
class _Batch:
    items: tuple[_Item, ...]

    @property
    def as_json(self) -> bool:
        return any(i.has_vector for i in self.items)

    def call(self, collection: str) -> Call[IngestReport]:
        path = f"/v1/collections/{seg(collection)}/documents"
        if self.as_json:
            body = b'{"documents":[' + b",".join(i.line for i in self.items) + b"]}"
            headers = {"content-type": "application/json"}
        else:
            body = b"\n".join(i.line for i in self.items) + b"\n"
            headers = {"content-type": "application/x-ndjson"}
        return Call("POST", path, IngestReport.model_validate, content=body, headers=headers)

    def without(self, position: int) -> _Batch:
        return _Batch(self.items[:position] + self.items[position + 1 :])

    def halves(self) -> list[_Batch]:
        mid = len(self.items) // 2
        return [_Batch(self.items[:mid]), _Batch(self.items[mid:])]


def _encode(index: int, doc: Any, tenant: str | None) -> _Item | Rejection:
    """The document as one JSON line, or its rejection when it cannot be sent at all."""
    if isinstance(doc, Document):
        payload = doc.model_dump(mode="json", exclude_none=True)
    elif isinstance(doc, Mapping):
        payload = dict(doc)
    else:
        return Rejection(index=index, reason=f"not a document: {type(doc).__name__} (a mapping or attest.Document)")
    if tenant is not None:
        payload.setdefault("tenant", tenant)
    doc_id = payload.get("id", payload.get("_id"))
    doc_id = str(doc_id) if doc_id is not None else None
    try:
        line = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    except (TypeError, ValueError) as e:
        return Rejection(index=index, id=doc_id, reason=f"not JSON: {e}")
    return _Item(index, doc_id, line, payload.get("vector") is not None)


def _batches(
    documents: Iterable[Any], tenant: str | None, batch_size: int, max_bytes: int, rejected: list[Rejection]
) -> Generator[_Batch, None, None]:
    items: list[_Item] = []
    size = 0
    for index, doc in enumerate(documents):
        item = _encode(index, doc, tenant)
        if isinstance(item, Rejection):
            rejected.append(item)
            continue
        if items and (len(items) >= batch_size or size + len(item.line) + 1 > max_bytes):
            yield _Batch(tuple(items))
            items, size = [], 0
        items.append(item)
        size += len(item.line) + 1
    if items:
        yield _Batch(tuple(items))


def _bad_document(error: AttestError, batch: _Batch) -> int | None:
    """The position in a JSON batch of the document a 400 is about, if it names one."""
    if not batch.as_json or error.status != 400 or not error.field:
        return None
    m = _DOC_FIELD.match(error.field)
    return int(m.group(1)) if m and int(m.group(1)) < len(batch.items) else None


def _merge(report: UploadReport, batch: _Batch, answer: IngestReport) -> None:
    report.accepted += answer.accepted
    report.duplicates += answer.duplicates
    report.chunks += answer.chunks
    for r in answer.rejected:
        item = batch.items[r.index] if 0 <= r.index < len(batch.items) else None
        report.rejected.append(
            Rejection(
                index=item.index if item else r.index,
                id=item.id if item else None,
                reason=r.reason,
            )
        )


def upload_plan(
    collection: str,
    documents: Iterable[DocumentLike],
    *,
    tenant: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    progress: bool | Mapping[str, Any] = True,
) -> Generator[Call[IngestReport], IngestReport | AttestError, UploadReport]:
    """Yields the calls of the upload, is sent each call's answer (or its AttestError), returns the report."""
    if batch_size < 1 or max_batch_bytes < 1:
        raise ValueError("batch_size and max_batch_bytes must be at least 1")
    total = len(documents) if hasattr(documents, "__len__") else None  # type: ignore[arg-type]
    bar_args = dict(progress) if isinstance(progress, Mapping) else {}
    bar = tqdm(
        total=total, unit="doc", desc=f"upload {collection}", disable=progress is False, **bar_args
    )
    report = UploadReport()
    client_rejected: list[Rejection] = []
    try:
        for batch in _batches(documents, tenant, batch_size, max_batch_bytes, client_rejected):
            pending = [batch]
            while pending:
                part = pending.pop(0)
                answer = yield part.call(collection)
                report.batches += 1
                if isinstance(answer, IngestReport):
                    _merge(report, part, answer)
                    continue
                if answer.status == 413 and len(part.items) > 1:
                    pending[:0] = part.halves()
                    continue
                bad = _bad_document(answer, part)
                if bad is None:
                    raise answer
                item = part.items[bad]
                # The server counts from the start of this request; the report from the start of the input.
                here = f"documents[{bad}]"
                there = f"documents[{item.index}]"
                report.rejected.append(
                    Rejection(
                        index=item.index,
                        id=item.id,
                        field=answer.field.replace(here, there, 1) if answer.field else None,
                        reason=answer.message.replace(here, there),
                    )
                )
                if len(part.items) > 1:
                    pending.insert(0, part.without(bad))
            report.documents += len(batch.items)
            bar.update(len(batch.items))
            bar.set_postfix(accepted=report.accepted, rejected=len(report.rejected) + len(client_rejected))
        report.rejected.extend(client_rejected)
        report.documents += len(client_rejected)
        bar.update(len(client_rejected))
    finally:
        bar.close()
    report.rejected.sort(key=lambda r: r.index)
    return report
