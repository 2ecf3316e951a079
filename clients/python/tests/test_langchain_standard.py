"""LangChain's own conformance kit (langchain-tests) against attest.langchain, on a real `attest dev`.

The retriever runs `RetrieversIntegrationTests`, the answer tool `ToolsUnitTests` and `ToolsIntegrationTests`,
each twice: with the sync client alone (``ainvoke`` then runs it on a worker thread) and with an `AsyncClient`
beside it (``ainvoke`` goes through that). The kit's tests are inherited as they are, none overridden or marked
xfail: its own `test_no_overrides_DO_NOT_OVERRIDE` checks that.
"""

from __future__ import annotations

from typing import Any

import pytest_asyncio
from langchain_tests.integration_tests import RetrieversIntegrationTests, ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

import attest
from attest.langchain import AttestAnswerTool, AttestRetriever
from conftest import ANSWERABLE


class _OnDev:
    """The kit reads the constructor's arguments from properties, not fixtures: this autouse fixture puts the
    session's server and the squad collection where those properties find them. An `AsyncClient` is made per
    test, in the test's own event loop, since its connections belong to the loop they were opened in."""

    with_async_client = False

    @pytest_asyncio.fixture(autouse=True)
    async def _on_dev(self, dev, client, squad):
        self.collection = squad
        self.clients: dict[str, Any] = {"client": client}
        if not self.with_async_client:
            yield
            return
        async with attest.AsyncClient(dev.url) as async_client:
            self.clients["async_client"] = async_client
            yield


class _Retriever(_OnDev):
    @property
    def retriever_constructor(self) -> type[AttestRetriever]:
        return AttestRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"collection": self.collection, **self.clients}

    @property
    def retriever_query_example(self) -> str:
        # At least 3 of the collection's 20 paragraphs match it, as test_k_constructor_param needs.
        return ANSWERABLE


class _Tool(_OnDev):
    @property
    def tool_constructor(self) -> type[AttestAnswerTool]:
        return AttestAnswerTool

    @property
    def tool_constructor_params(self) -> dict[str, Any]:
        return {"collection": self.collection, **self.clients}

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"question": ANSWERABLE}


class TestRetrieverSync(_Retriever, RetrieversIntegrationTests):
    pass


class TestRetrieverAsync(_Retriever, RetrieversIntegrationTests):
    with_async_client = True


class TestToolUnitSync(_Tool, ToolsUnitTests):
    pass


class TestToolUnitAsync(_Tool, ToolsUnitTests):
    with_async_client = True


class TestToolIntegrationSync(_Tool, ToolsIntegrationTests):
    pass


class TestToolIntegrationAsync(_Tool, ToolsIntegrationTests):
    with_async_client = True
