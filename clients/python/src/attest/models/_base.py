"""Base classes of the models: what the server answers is read leniently, what the client sends strictly."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ApiModel(BaseModel):
    """A response object. Fields the server adds later are kept (``model_extra``), never an error, so an older
    client keeps working against a newer server."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class RequestModel(BaseModel):
    """A request body. Unknown fields are refused here as the server refuses them (a typo is not dropped)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def body(self) -> dict:
        """The JSON body: the fields that were set, without ``None`` values (absent = the server's default)."""
        return self.model_dump(mode="json", exclude_none=True)
