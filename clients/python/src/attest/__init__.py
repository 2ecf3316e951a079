"""Python client of Attest's HTTP API v1: collections, documents, hybrid search, grounded answers.

:class:`Client` blocks, :class:`AsyncClient` awaits; both take the server's URL (or ``$ATTEST_SERVER``),
``api_key=`` (or ``$ATTEST_API_KEY``) and ``ca_cert=`` (or ``$ATTEST_CA_CERT``), retry 429/503 honouring
``Retry-After``, and raise :class:`AttestError` with the API's ``code`` and ``field``. LangChain and LlamaIndex
adapters: :mod:`attest.langchain`, :mod:`attest.llamaindex` (extras ``attest-client[langchain]``, ``[llamaindex]``).
"""

from ._version import __version__
from .async_client import AsyncClient
from .client import Client
from .errors import (
    AttestError,
    AuthenticationError,
    ConflictError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    UnavailableError,
)
from .models import (
    AskDelta,
    AskResponse,
    Citation,
    Claim,
    Document,
    Hit,
    ReembedJob,
    SearchResponse,
    Turn,
    UploadReport,
)
from .retry import RetryPolicy
from .stream import AskStream, AsyncAskStream

__all__ = [
    "AskDelta", "AskResponse", "AskStream", "AsyncAskStream", "AsyncClient", "AttestError", "AuthenticationError",
    "Citation", "Claim", "Client", "ConflictError", "Document", "Hit", "InvalidArgumentError", "NotFoundError",
    "PermissionDeniedError", "RateLimitedError", "ReembedJob", "RetryPolicy", "SearchResponse", "Turn",
    "UnavailableError", "UploadReport", "__version__",
]
