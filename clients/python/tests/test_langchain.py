"""The LangChain retriever and grounded-answer tool (real langchain-core) against a real `attest dev`."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.documents import Document
from langchain_core.messages import ToolMessage

import attest
from attest.grounded import abstention_text
from attest.langchain import AttestAnswerTool, AttestRetriever
from conftest import ANSWERABLE, UNANSWERABLE


def test_retriever_documents_carry_score_lanes_and_provenance(client, squad):
    docs = AttestRetriever(collection=squad, client=client, k=3).invoke("Where was Super Bowl 50 played?")
    hits = client.search(squad, "Where was Super Bowl 50 played?", k=3).hits
    assert all(isinstance(d, Document) for d in docs) and len(docs) == len(hits) == 3
    for doc, hit in zip(docs, hits, strict=True):
        assert doc.page_content == hit.text and doc.id == hit.chunk_id
        meta = doc.metadata
        assert (meta["collection"], meta["doc_id"], meta["chunk_id"], meta["title"]) == (
            squad, hit.doc_id, hit.chunk_id, "Super Bowl 50")
        assert meta["score"] == hit.score and meta["lanes"] == hit.lanes.model_dump(exclude_none=True)
        assert meta["fallback_mode"] is False and meta["degraded"] is False


def test_retriever_passes_tenant_filter_lanes_and_k(client, tenants):
    acme = AttestRetriever(collection=tenants, client=client, tenant="acme")
    assert sorted(d.metadata["doc_id"] for d in acme.invoke("rockets")) == ["acme-1", "acme-2"]
    english = AttestRetriever(collection=tenants, client=client, tenant="acme", filter={"lang": "en"})
    assert [d.metadata["doc_id"] for d in english.invoke("rockets")] == ["acme-1"]
    assert english.invoke("rockets")[0].metadata["document_metadata"] == {"lang": "en", "year": 2001}
    bm25 = AttestRetriever(collection=tenants, client=client, tenant="acme", lanes=["bm25"], k=1)
    docs = bm25.invoke("rockets")
    assert len(docs) == 1 and list(docs[0].metadata["lanes"]) == ["bm25"]


def test_retriever_async(dev, squad):
    async def main():
        async with attest.AsyncClient(dev.url) as ac:
            retriever = AttestRetriever(collection=squad, async_client=ac, k=2)
            return await retriever.ainvoke("Levi's Stadium")

    docs = asyncio.run(main())
    assert len(docs) == 2 and docs[0].metadata["collection"] == squad


def test_retriever_per_call_arguments_replace_its_own_for_that_call(client, tenants):
    retriever = AttestRetriever(collection=tenants, client=client, tenant="acme", filter={"lang": "en"})

    def ids(**per_call):
        return sorted(d.metadata["doc_id"] for d in retriever.invoke("rockets", **per_call))

    top = client.search(tenants, "rockets", tenant="acme", k=1).hits[0].doc_id
    assert ids() == ["acme-1"]
    assert ids(filter=None) == ["acme-1", "acme-2"]
    assert ids(filter=None, k=1) == [top]
    assert ids(filter={"lang": "fr"}) == ["acme-2"]
    assert ids(tenant="globex", filter=None) == ["globex-1"]
    # A call's arguments do not stay with the retriever.
    assert ids() == ["acme-1"] and (retriever.k, retriever.filter, retriever.tenant) == (4, {"lang": "en"}, "acme")


def test_retriever_per_call_arguments_async(dev, client, tenants):
    calls = [{"k": 1}, {"filter": {"lang": "fr"}}, {"tenant": "globex"}, {}]
    top = client.search(tenants, "rockets", tenant="acme", k=1).hits[0].doc_id
    expected = [[top], ["acme-2"], ["globex-1"], ["acme-1", "acme-2"]]

    async def ids(retriever):
        return [sorted(d.metadata["doc_id"] for d in await retriever.ainvoke("rockets", **kw)) for kw in calls]

    async def through_async_client():
        async with attest.AsyncClient(dev.url) as ac:
            return await ids(AttestRetriever(collection=tenants, async_client=ac, tenant="acme"))

    assert asyncio.run(through_async_client()) == expected
    # Without an AsyncClient the sync client runs on a worker thread: the call's arguments go there too.
    assert asyncio.run(ids(AttestRetriever(collection=tenants, client=client, tenant="acme"))) == expected


def test_retriever_refuses_unknown_per_call_arguments(dev, client, tenants):
    retriever = AttestRetriever(collection=tenants, client=client)
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) 'top_k'; a call may give k, lanes, filter"):
        retriever.invoke("rockets", top_k=1)
    with pytest.raises(TypeError, match="'search_kwargs'"):
        asyncio.run(retriever.ainvoke("rockets", search_kwargs={"k": 1}))

    async def with_async_client():
        async with attest.AsyncClient(dev.url) as ac:
            return await AttestRetriever(collection=tenants, async_client=ac).ainvoke("rockets", tennant="acme")

    with pytest.raises(TypeError, match="'tennant'"):
        asyncio.run(with_async_client())
    # `verbose` is LangChain's own (its callbacks read it), not an unknown search argument.
    assert len(retriever.invoke("rockets", verbose=True, k=1)) == 1


def test_tool_returns_the_cited_answer(client, squad):
    tool = AttestAnswerTool(collection=squad, client=client)
    content = tool.invoke(ANSWERABLE)
    answer = client.ask(squad, ANSWERABLE)
    assert content.startswith(answer.answer)
    assert "Sources:\n[1] Super Bowl 50 (doc squad-dev-a0000-" in content
    message = tool.invoke({"type": "tool_call", "id": "call-1", "name": tool.name,
                           "args": {"question": ANSWERABLE}})
    assert isinstance(message, ToolMessage) and message.content == content
    assert message.artifact.status == "answered" and message.artifact.citations


def test_tool_returns_the_abstention_never_an_answer(client, squad):
    tool = AttestAnswerTool(collection=squad, client=client)
    message = tool.invoke({"type": "tool_call", "id": "call-2", "name": tool.name,
                           "args": {"question": UNANSWERABLE}})
    answer = message.artifact
    assert answer.status == "abstained" and answer.answer == ""
    assert message.content == abstention_text(answer)
    assert message.content.startswith(f"Attest abstained (reason: {answer.reason}")
    assert "Sources" not in message.content and "[1]" not in message.content


def test_tool_async(dev, squad):
    async def main():
        async with attest.AsyncClient(dev.url) as ac:
            return await AttestAnswerTool(collection=squad, async_client=ac).ainvoke(UNANSWERABLE)

    assert asyncio.run(main()).startswith("Attest abstained")
