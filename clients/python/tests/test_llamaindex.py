"""The LlamaIndex retriever and query engine (real llama-index-core) against a real `attest dev`.

LlamaIndex has no conformance kit like langchain-tests: the last tests here check what LangChain's kit checks of
the LangChain adapter (tests/test_langchain_standard.py), as far as LlamaIndex's interfaces go. Its ``retrieve``
takes nothing but the query, so top-k is changed between calls (``similarity_top_k``, as on LlamaIndex's own
retrievers) rather than per call; each check runs with the sync client and with the async one.
"""

from __future__ import annotations

import asyncio

from llama_index.core.base.response.schema import Response
from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, TextNode

import attest
from attest.grounded import abstention_text
from attest.llamaindex import AttestQueryEngine, AttestRetriever
from conftest import ANSWERABLE, UNANSWERABLE


def test_retriever_nodes_carry_score_lanes_and_provenance(client, squad):
    nodes = AttestRetriever(squad, client, k=3).retrieve("Where was Super Bowl 50 played?")
    hits = client.search(squad, "Where was Super Bowl 50 played?", k=3).hits
    assert all(isinstance(n, NodeWithScore) for n in nodes) and len(nodes) == 3
    for node, hit in zip(nodes, hits, strict=True):
        assert node.score == hit.score and node.node.node_id == hit.chunk_id
        assert node.node.get_content() == hit.text
        assert node.node.relationships[NodeRelationship.SOURCE].node_id == hit.doc_id
        meta = node.node.metadata
        assert (meta["collection"], meta["doc_id"], meta["title"]) == (squad, hit.doc_id, "Super Bowl 50")
        assert meta["lanes"] == hit.lanes.model_dump(exclude_none=True)


def test_retriever_passes_tenant_filter_lanes_and_k(client, tenants):
    def ids(**kw):
        return sorted(n.node.metadata["doc_id"] for n in AttestRetriever(tenants, client, **kw).retrieve("rockets"))

    assert ids(tenant="acme") == ["acme-1", "acme-2"]
    assert ids(tenant="acme", filter={"year": {"gte": 2000}}) == ["acme-1"]
    assert ids(tenant="globex", lanes=["dense"], k=1) == ["globex-1"]


def test_query_engine_answers_with_citations_as_source_nodes(client, squad):
    response = AttestQueryEngine(collection=squad, client=client).query(ANSWERABLE)
    answer = client.ask(squad, ANSWERABLE)
    assert isinstance(response, Response) and response.response == answer.answer
    assert [(n.node.node_id, n.node.get_content(), n.score) for n in response.source_nodes] == [
        (c.chunk_id, c.quote, c.score) for c in answer.citations]
    assert response.metadata["status"] == "answered" and response.metadata["verdict"] == "supported"
    assert response.metadata["abstained"] is False


def test_query_engine_returns_the_abstention(client, squad):
    response = AttestQueryEngine(collection=squad, client=client).query(UNANSWERABLE)
    attest_answer = response.metadata["attest"]
    assert attest_answer.status == "abstained" and response.metadata["abstained"] is True
    assert response.response == abstention_text(attest_answer) and response.source_nodes == []
    assert str(response).startswith("Attest abstained")


def test_async_query_and_retrieve(dev, squad):
    async def main():
        async with attest.AsyncClient(dev.url) as ac:
            engine = AttestQueryEngine(collection=squad, async_client=ac)
            retriever = AttestRetriever(squad, async_client=ac, k=2)
            return await engine.aquery(ANSWERABLE), await retriever.aretrieve("Levi's Stadium")

    response, nodes = asyncio.run(main())
    assert response.metadata["status"] == "answered" and response.source_nodes
    assert len(nodes) == 2


def test_retriever_top_k_is_honoured_and_can_change_between_calls(client, squad):
    retriever = AttestRetriever(squad, client, k=3)
    assert retriever.similarity_top_k == 3 and len(retriever.retrieve(ANSWERABLE)) == 3
    retriever.similarity_top_k = 1
    assert len(retriever.retrieve(ANSWERABLE)) == 1
    retriever.similarity_top_k = 5
    assert len(retriever.retrieve(QueryBundle(ANSWERABLE))) == 5


def test_retriever_top_k_async(dev, squad):
    async def main():
        async with attest.AsyncClient(dev.url) as ac:
            retriever = AttestRetriever(squad, async_client=ac, k=3)
            counts = [len(await retriever.aretrieve(ANSWERABLE))]
            retriever.similarity_top_k = 1
            return counts + [len(await retriever.aretrieve(QueryBundle(ANSWERABLE)))]

    assert asyncio.run(main()) == [3, 1]


def assert_scored_text_nodes(nodes):
    assert isinstance(nodes, list) and nodes
    for n in nodes:
        assert isinstance(n, NodeWithScore) and isinstance(n.node, TextNode) and isinstance(n.score, float)
        assert n.node.get_content() and n.node.node_id


def test_retriever_returns_scored_text_nodes_sync_and_async(dev, client, squad):
    async def through_async_client():
        async with attest.AsyncClient(dev.url) as ac:
            return await AttestRetriever(squad, async_client=ac).aretrieve(ANSWERABLE)

    sync_nodes = AttestRetriever(squad, client).retrieve(ANSWERABLE)
    async_nodes = asyncio.run(through_async_client())
    # Without an AsyncClient, aretrieve is the sync retrieval.
    fallback_nodes = asyncio.run(AttestRetriever(squad, client).aretrieve(ANSWERABLE))
    for nodes in (sync_nodes, async_nodes, fallback_nodes):
        assert_scored_text_nodes(nodes)
        assert [(n.node.node_id, n.score) for n in nodes] == [(n.node.node_id, n.score) for n in sync_nodes]


def test_query_engine_returns_a_response_sync_and_async(dev, client, squad):
    async def through_async_client():
        async with attest.AsyncClient(dev.url) as ac:
            return await AttestQueryEngine(collection=squad, async_client=ac).aquery(QueryBundle(ANSWERABLE))

    engine = AttestQueryEngine(collection=squad, client=client)
    responses = [engine.query(ANSWERABLE), asyncio.run(through_async_client()), asyncio.run(engine.aquery(ANSWERABLE))]
    for response in responses:
        # Response, not a StreamingResponse or a PydanticResponse: what synthesizers return by default.
        assert type(response) is Response and isinstance(response.response, str) and response.response
        assert_scored_text_nodes(response.source_nodes)
        assert (response.response, [n.node.node_id for n in response.source_nodes]) == (
            responses[0].response, [n.node.node_id for n in responses[0].source_nodes])
