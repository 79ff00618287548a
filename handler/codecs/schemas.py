"""Wire schemas of the Open Inference Protocol (REST), keeping the spec's names.

These validate the request *envelope* only. Tensor ``data`` is typed ``Any`` on purpose:
pydantic never walks it element by element; ``handler/codecs/json_data.py`` converts it with numpy.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

#: ``$parameter = $string : $string | $number | $boolean``
ParameterValue = StrictStr | StrictBool | StrictInt | StrictFloat
Parameters = dict[str, ParameterValue]

#: "Each dimension must be an integer representable as an unsigned 64-bit integer value."
#: (The bound is enforced but left out of the JSON schema: documentation tools would show 2**64 - 1 as a
#: rounded float example.)
Dimension = Annotated[StrictInt, Field(ge=0), AfterValidator(lambda d: _at_most_u64(d))]

#: The protocol's tensor data types (``Tensor Data Types`` table), shown as an enum in the OpenAPI document.
DATATYPES = ("BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32",
             "FP64", "BYTES", "BF16")  # fmt: skip
_DATATYPE_DOC = {"enum": list(DATATYPES), "examples": ["FP32"]}


def _at_most_u64(dimension: int) -> int:
    if dimension > 2**64 - 1:
        raise ValueError("a dimension must be representable as an unsigned 64-bit integer")
    return dimension


class _Wire(BaseModel):
    # Validators are built on first use: of these models only ``InferenceRequest`` validates requests (built
    # below, in the init phase); the others document the wire format in the OpenAPI document.
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)


class MetadataTensor(_Wire):
    """``$metadata_tensor = {"name": $string, "datatype": $string, "shape": [$number, ...]}``"""

    name: str
    datatype: str = Field(json_schema_extra=_DATATYPE_DOC)
    shape: list[int] = Field(examples=[[-1, 4]])


class MetadataServerResponse(_Wire):
    """``$metadata_server_response = {"name": $string, "version": $string, "extensions": [$string, ...]}``"""

    name: str
    version: str
    extensions: list[str]


class MetadataModelResponse(_Wire):
    """``$metadata_model_response = {"name", "versions" #optional, "platform", "inputs", "outputs"}``"""

    name: str
    versions: list[str] | None = None
    platform: str
    inputs: list[MetadataTensor]
    outputs: list[MetadataTensor]


class RequestInput(_Wire):
    """``$request_input = {"name", "shape", "datatype", "parameters" #optional, "data"}``

    With Triton's binary tensor extension ``data`` is absent and
    ``parameters.binary_data_size`` gives the byte count after the JSON header.
    """

    name: StrictStr = Field(examples=["input"])
    shape: list[Dimension] = Field(examples=[[1, 4]])
    datatype: StrictStr = Field(json_schema_extra=_DATATYPE_DOC)
    parameters: Parameters | None = None
    data: Any = Field(default=None, examples=[[5.1, 3.5, 1.4, 0.2]])


class RequestOutput(_Wire):
    """``$request_output = {"name": $string, "parameters": $parameters #optional}``"""

    name: StrictStr
    parameters: Parameters | None = None


class InferenceRequest(_Wire):
    """``$inference_request = {"id" #optional, "parameters" #optional, "inputs", "outputs" #optional}``"""

    id: StrictStr | None = None
    parameters: Parameters | None = None
    inputs: list[RequestInput]
    outputs: list[RequestOutput] | None = None


class ResponseOutput(_Wire):
    """``$response_output = {"name", "shape", "datatype", "parameters" #optional, "data"}``"""

    name: str
    shape: list[int] = Field(examples=[[1, 3]])
    datatype: str = Field(json_schema_extra=_DATATYPE_DOC)
    parameters: dict[str, Any] | None = None
    data: list[Any] | None = None


class InferenceResponse(_Wire):
    """``$inference_response = {"model_name", "model_version" #optional, "id", "parameters" #optional, "outputs"}``"""

    model_name: str
    model_version: str | None = None
    id: str
    parameters: dict[str, Any] | None = None
    outputs: list[ResponseOutput]


class ErrorResponse(_Wire):
    """``$inference_error_response = {"error": <error message string>}``"""

    error: str


class ReadyServerResponse(_Wire):
    """``$ready_server_response = {"ready": $bool}`` (later REST text)."""

    ready: bool


class LiveServerResponse(_Wire):
    """``$live_server_response = {"live": $bool}``"""

    live: bool


class ReadyModelResponse(_Wire):
    """``$ready_model_response = {"name": $string, "ready": $bool}``"""

    name: str
    ready: bool


class RepositoryIndexRequest(_Wire):
    """Triton's ``$repository_index_request = {"ready": $bool #optional}`` (the body may also be empty)."""

    ready: bool = False


class RepositoryIndexEntry(_Wire):
    """One entry of Triton's ``POST /v2/repository/index`` answer."""

    name: str
    version: str | None = None
    state: str | None = None
    reason: str | None = None


InferenceRequest.model_rebuild(force=True)  # the one model every JSON infer request is validated with
