"""``mlp invoke``: one Triton inference through the SageMaker multi-model endpoint.

The request is Triton's binary+JSON inference protocol built by ``tritonclient.http``
and sent with ``sagemaker-runtime`` InvokeEndpoint; ``TargetModel`` picks the archive.
While the endpoint loads an archive it answers ModelNotReadyException: the call is
retried with backoff until ``--timeout``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ml_platform.triton.kinds import IMAGE, KINDS, TEXT, EnsembleKind
from ml_platform_cli.aws import (
    CliError,
    Context,
    EndpointNotFound,
    Subcommands,
    doc_summary,
    error_code,
    error_message,
    one_line,
)

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike

    from ml_platform.triton.archive_names import ArchiveRef

    NDArray = np.ndarray[Any, Any]

__all__ = [
    "IMAGE_DTYPE",
    "IMAGE_INPUT",
    "IMAGE_OUTPUT",
    "TEXT_DTYPE",
    "TEXT_INPUT",
    "TEXT_MAX_BATCH",
    "TEXT_OUTPUT",
    "add_parser",
    "content_type",
    "default_model",
    "embedding_summary",
    "image_request",
    "image_tensors",
    "infer_on_triton",
    "invoke_with_retry",
    "is_model_not_ready",
    "kind_tensors",
    "parse_response",
    "request_body",
    "run",
    "text_request",
    "text_tensors",
    "timeout_seconds",
    "top_k",
    "triton_address",
]

# The built-in ensembles' tensors (the table of kinds), in tritonclient's dtype names.
IMAGE_INPUT, IMAGE_OUTPUT, IMAGE_DTYPE = IMAGE.input.name, IMAGE.output.name, IMAGE.client_dtype
TEXT_INPUT, TEXT_OUTPUT, TEXT_DTYPE = TEXT.input.name, TEXT.output.name, TEXT.client_dtype
TEXT_MAX_BATCH = TEXT.cli.max_request  # max_batch_size of the text ensemble
TRITON_CONTENT_TYPE = "application/vnd.sagemaker-triton.binary+json;json-header-size={}"
_HEADER_SIZE = re.compile(r"json-header-size=(\d+)")
READ_TIMEOUT = 70  # seconds; a first request may wait for the archive to load
MAX_BACKOFF = 10.0

# Indirections so tests can run the retry loop without waiting.
_sleep = time.sleep
_clock = time.monotonic


def timeout_seconds(text: str) -> float:
    """``--timeout``: a finite number of seconds, zero or more (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite number of seconds >= 0")
    return value


def triton_address(text: str) -> str:
    """``--triton-url``: host:port without a scheme (tritonclient adds http:// itself)."""
    if "://" in text:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give host:port without a scheme, e.g. localhost:8000"
        )
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r}: expected host:port, e.g. localhost:8000")
    return text


def add_parser(
    sub: Subcommands,
    parents: list[argparse.ArgumentParser],
) -> None:
    p = sub.add_parser(
        "invoke",
        parents=parents,
        help="send an image or sentences to an ensemble on the endpoint",
        description=doc_summary(__doc__),
    )
    what = p.add_mutually_exclusive_group(required=True)
    for kind in KINDS:
        if kind.cli.invoke_input == "file":
            what.add_argument(f"--{kind.name}", type=Path, help=kind.cli.invoke_help)
        else:
            what.add_argument(f"--{kind.name}", action="append", help=kind.cli.invoke_help)
    p.add_argument("--endpoint", help="endpoint name (default: the first endpoint in the settings)")
    defaults = "; ".join(kind.cli.default_help for kind in KINDS)
    target = p.add_mutually_exclusive_group()
    target.add_argument(
        "--model",
        metavar="NAME[@VERSION]",
        help="archive to call: a logical name (its newest version under the "
        f"model prefix) or NAME@VERSION (default: {defaults})",
    )
    target.add_argument(
        "--target-model", help="exact TargetModel (archive key under the prefix), not resolved"
    )
    p.add_argument(
        "--timeout",
        type=timeout_seconds,
        default=180.0,
        help="seconds to keep retrying while the model loads (default: 180)",
    )
    p.add_argument("--top-k", type=int, default=5, help="classes to print for --image (default: 5)")
    p.add_argument("--labels", type=Path, help="label file, one class per line, for --image")
    p.add_argument("--json", action="store_true", help="print JSON")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--triton-url",
        type=triton_address,
        help="send to this Triton server (host:port, e.g. localhost:8000 through "
        "kubectl port-forward to Triton on EKS) instead of the SageMaker "
        "endpoint",
    )
    where.add_argument(
        "--local",
        type=Path,
        metavar="DIR",
        help="send to the local server of `mlp models serve --local DIR` "
        "(SageMaker's front end on this machine) instead of the endpoint",
    )
    p.set_defaults(run=run)


def _http() -> ModuleType:
    try:
        import tritonclient.http as http
    except RuntimeError:  # tritonclient raises this when its HTTP extra is not installed
        raise CliError(
            "mlp invoke needs tritonclient's HTTP support: pip install 'tritonclient[http]'"
        ) from None
    module: ModuleType = http
    return module


def kind_tensors(kind: EnsembleKind, value: bytes | list[str]) -> tuple[list[Any], list[Any]]:
    """Triton inputs and requested outputs for an ensemble of ``kind``: the bytes of one
    encoded file, or a batch of sentences (:attr:`KindCli.invoke_input`)."""
    import numpy as np

    http = _http()
    if isinstance(value, bytes):
        data = np.frombuffer(value, dtype=np.uint8).reshape(1, -1)
    else:
        data = np.array([[s.encode("utf-8")] for s in value], dtype=np.object_)
    tensor = http.InferInput(kind.input.name, list(data.shape), kind.client_dtype)
    tensor.set_data_from_numpy(data, binary_data=True)
    return [tensor], [http.InferRequestedOutput(kind.output.name, binary_data=True)]


def image_tensors(image: bytes) -> tuple[list[Any], list[Any]]:
    """Triton inputs and requested outputs for the image ensemble: one encoded image."""
    return kind_tensors(IMAGE, image)


def text_tensors(sentences: list[str]) -> tuple[list[Any], list[Any]]:
    """Triton inputs and requested outputs for the text ensemble: a batch of sentences."""
    return kind_tensors(TEXT, sentences)


def request_body(inputs: list[Any], outputs: list[Any]) -> tuple[bytes, int | None]:
    """Triton binary+JSON request body and its JSON header size (None: plain JSON)."""
    body: tuple[bytes, int | None] = _http().InferenceServerClient.generate_request_body(
        inputs, outputs=outputs
    )
    return body


def image_request(image: bytes) -> tuple[bytes, int | None]:
    """Request body (and JSON header size) for the image ensemble: one encoded image."""
    return request_body(*image_tensors(image))


def text_request(sentences: list[str]) -> tuple[bytes, int | None]:
    """Request body (and JSON header size) for the text ensemble: a batch of sentences."""
    return request_body(*text_tensors(sentences))


def infer_on_triton(
    url: str, model: str, inputs: list[Any], outputs: list[Any], output: str
) -> NDArray:
    """Send the request straight to a Triton server (e.g. Triton on EKS through
    ``kubectl port-forward``) and return the ``output`` tensor."""
    http = _http()
    client = http.InferenceServerClient(
        url=url, connection_timeout=10, network_timeout=READ_TIMEOUT
    )
    try:
        result = client.infer(model, inputs, outputs=outputs)
    except Exception as error:  # InferenceServerException or a connection error
        raise CliError(f"Triton at {url}, model {model!r}: {error}") from None
    finally:
        client.close()
    array: NDArray | None = result.as_numpy(output)
    if array is None:
        raise CliError(f"Triton at {url}: the response has no output {output!r}")
    return array


def content_type(json_size: int | None) -> str:
    return "application/json" if json_size is None else TRITON_CONTENT_TYPE.format(json_size)


def parse_response(body: bytes, response_content_type: str, output: str) -> NDArray:
    """The ``output`` tensor of a Triton response as a NumPy array."""
    match = _HEADER_SIZE.search(response_content_type or "")
    header_length = int(match.group(1)) if match else None
    http = _http()
    try:
        result = http.InferenceServerClient.parse_response_body(body, header_length=header_length)
    except Exception as error:  # malformed JSON or binary section
        raise CliError(f"the endpoint's response is not a Triton response ({error})") from None
    array: NDArray | None = result.as_numpy(output)
    if array is None:
        names = [o.get("name") for o in result.get_response().get("outputs", [])]
        raise CliError(f"the response has no output {output!r} (outputs: {names})")
    return array


def _local_target(folder: Path, model: str | None, target_model: str | None, kind: str) -> str:
    """The archive (TargetModel) to call on the local server of ``folder``: ``--target-model``,
    the newest loaded version of ``--model``, or the one loaded archive of this kind."""
    from ml_platform.triton.archive_names import parse_key
    from ml_platform_cli.serve import read_state

    loaded = read_state(folder)["archives"]
    runnable = {name: info for name, info in loaded.items() if info["complete"]}
    if target_model is not None:
        candidates = [target_model] if target_model in runnable else []
    elif model is not None:
        ref = _ref(model)
        candidates = [name for name in runnable if ref.matches(name)]
    else:
        candidates = [name for name, info in runnable.items() if info["kind"] == kind]
    if not candidates:
        asked = target_model or model or f"a {kind} ensemble"
        raise CliError(
            f"--local {folder}: {asked} is not among the archives loaded there that "
            f"run end to end: {sorted(runnable) or 'none'}"
        )
    if len(candidates) > 1 and model is None and target_model is None:
        raise CliError(
            f"--local {folder}: several {kind} archives are loaded "
            f"({', '.join(sorted(candidates))}): pick one with --model NAME[@VERSION]"
        )
    # Newest first: the archive file's modification time in the folder.
    return max(
        candidates,
        key=lambda name: (
            (folder / name).stat().st_mtime if (folder / name).exists() else 0,
            parse_key(name) is not None,
            name,
        ),
    )


def _invoke_local(
    folder: Path, target: str, inputs: list[Any], outputs: list[Any], output: str
) -> NDArray:
    from ml_platform_cli.local_server import invoke_local
    from ml_platform_cli.serve import read_state

    body, json_size = request_body(inputs, outputs)
    try:
        reply = invoke_local(read_state(folder)["socket"], target, body, content_type(json_size))
    except OSError as error:
        raise CliError(f"--local {folder}: the local server does not answer ({error})") from None
    if reply.status != 200:
        raise CliError(
            f"{target} on the local server failed (HTTP {reply.status}): {one_line(reply.text())}"
        )
    return parse_response(reply.body, reply.headers.get("content-type", ""), output)


def is_model_not_ready(error: Exception) -> bool:
    code = error_code(error)
    return code == "ModelNotReadyException" or (
        code == "ModelError" and "not ready" in error_message(error).lower()
    )


def invoke_with_retry(
    client: Any,
    *,
    endpoint: str,
    target_model: str,
    body: bytes,
    request_content_type: str,
    timeout: float,
    on_retry: Callable[[int, float], None] | None = None,
) -> tuple[dict[str, Any], int]:
    """InvokeEndpoint, retrying while the model loads; returns (response, attempts)."""
    from botocore.exceptions import ClientError

    deadline = _clock() + timeout
    delay = 1.0
    attempts = 0
    while True:
        attempts += 1
        try:
            response = client.invoke_endpoint(
                EndpointName=endpoint,
                TargetModel=target_model,
                ContentType=request_content_type,
                Body=body,
            )
            return response, attempts
        except ClientError as error:
            if not is_model_not_ready(error):
                raise _explain_invoke_error(error, endpoint, target_model) from None
            remaining = deadline - _clock()
            if remaining <= 0:
                raise CliError(
                    f"{target_model} on {endpoint} still not ready after {attempts} attempts "
                    f"({timeout:g} s): {error_message(error)}"
                ) from None
            wait = min(delay, remaining)
            if on_retry:
                on_retry(attempts, wait)
            _sleep(wait)
            delay = min(delay * 2, MAX_BACKOFF)


def _explain_invoke_error(error: Exception, endpoint: str, target_model: str) -> Exception:
    code, message = error_code(error), error_message(error)
    lowered = message.lower()
    # SageMaker says "Endpoint <name> of account <id> not found." for a missing endpoint, and
    # "Failed to download model data ..." / "... model ... not found" for a missing archive.
    if code == "ValidationError" and ("model data" in lowered or "targetmodel" in lowered):
        return CliError(
            f"{target_model} not found under {endpoint}'s model prefix (upload it with "
            f"`mlp models upload`): {one_line(message)}"
        )
    if code == "ValidationError" and re.search(r"endpoint\b.*\bnot found", lowered):
        return EndpointNotFound(f"endpoint {endpoint!r} not found: {message}")
    if code == "ModelError":
        details = getattr(error, "response", {})
        status = details.get("OriginalStatusCode", "?")
        original = details.get("OriginalMessage") or message
        return CliError(f"{target_model} on {endpoint} failed (HTTP {status}): {original}")
    return error  # main() explains other AWS errors


def _read_labels(path: Path | None) -> list[str]:
    if path is None:
        return []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        return [line.strip() for line in lines if line.strip()]
    except OSError as error:
        raise CliError(f"--labels {path}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise CliError(f"--labels {path}: not UTF-8 text (byte {error.start})") from None


def top_k(scores: ArrayLike, k: int, labels: list[str]) -> list[dict[str, Any]]:
    import numpy as np

    values = np.asarray(scores, dtype=np.float64).reshape(-1)
    order = np.argsort(-values, kind="stable")[: max(k, 0)]
    return [
        {
            "index": int(i),
            "label": labels[i] if i < len(labels) else str(int(i)),
            "score": float(values[i]),
        }
        for i in order
    ]


def embedding_summary(sentence: str, vector: ArrayLike, first: int = 5) -> dict[str, Any]:
    import numpy as np

    values = np.asarray(vector, dtype=np.float64).reshape(-1)
    return {
        "text": sentence,
        "dimension": int(values.size),
        "norm": float(np.linalg.norm(values)),
        "first": [round(float(v), 6) for v in values[:first]],
    }


def _invoke_sagemaker(
    ctx: Context,
    args: argparse.Namespace,
    endpoint: str,
    target: str,
    inputs: list[Any],
    outputs: list[Any],
    output: str,
) -> tuple[NDArray, int]:
    """InvokeEndpoint with TargetModel, retrying while the archive loads."""
    from botocore.config import Config

    body, json_size = request_body(inputs, outputs)
    client = ctx.client(
        "sagemaker-runtime",
        config=Config(read_timeout=READ_TIMEOUT, retries={"mode": "standard", "max_attempts": 3}),
    )

    def note(attempt: int, wait: float) -> None:
        if not args.json:
            import sys

            print(f"model not ready (attempt {attempt}), retrying in {wait:.0f} s", file=sys.stderr)

    response, attempts = invoke_with_retry(
        client,
        endpoint=endpoint,
        target_model=target,
        body=body,
        request_content_type=content_type(json_size),
        timeout=args.timeout,
        on_retry=note,
    )
    array = parse_response(response["Body"].read(), response.get("ContentType", ""), output)
    return array, attempts


def _ref(model: str) -> ArchiveRef:
    from ml_platform.triton.archive_names import parse_ref

    try:
        return parse_ref(model)
    except ValueError as error:
        raise CliError(f"--model: {error}") from None


def _logical(model: str) -> str:
    return _ref(model).logical


def _resolve(ctx: Context, model: str) -> str:
    """The TargetModel of ``NAME`` (newest version) or ``NAME@VERSION`` under the prefix."""
    from ml_platform_cli.archives import model_location, resolve

    _logical(model)  # a malformed reference fails before any AWS call
    bucket, prefix = model_location(ctx)
    key, _ = resolve(ctx.client("s3"), bucket, prefix, model)
    return key


def default_model(ctx: Context, endpoint: str, kind: EnsembleKind) -> str:
    """What ``--<kind>`` calls without ``--model``: the kind's default archive, or, for a kind
    with an :attr:`~ml_platform.triton.kinds.KindCli.uploaded_default`, the first archive of
    that kind the endpoint's settings list (the first endpoint's, for one not in the settings)
    that has a version under the prefix, else that default if it has one."""
    from ml_platform.triton.kinds import kind_of_archive
    from ml_platform_cli.archives import list_archives, model_location

    fallback = kind.cli.uploaded_default
    if fallback is None:
        return kind.default_archive
    endpoints = ctx.settings.inference.endpoints
    # An endpoint outside the settings (moto names its own) is taken for the first one's.
    configured = next((e for e in endpoints if e.name == endpoint), endpoints[0])
    wanted = [r.logical for r in configured.archive_refs]
    candidates = [n for n in wanted if kind_of_archive(n) is kind]
    candidates += [] if fallback in candidates else [fallback]
    bucket, prefix = model_location(ctx)
    uploaded = {a.ref.logical for a in list_archives(ctx.client("s3"), bucket, prefix) if a.ref}
    for name in candidates:
        if name in uploaded:
            return name
    raise CliError(
        f"no {kind.name} archive under s3://{bucket}/{prefix} (looked for "
        f"{', '.join(candidates)}): package one ({kind.cli.package_example}) and upload "
        "it (mlp models upload), or pass --model"
    )


def _request(kind: EnsembleKind, args: argparse.Namespace) -> tuple[list[Any], list[Any]]:
    """The request of ``--<kind>``, checked."""
    value = getattr(args, kind.name)
    flag = f"--{kind.name}"
    if kind.cli.invoke_input == "file":
        try:
            data = value.read_bytes()
        except OSError as error:
            raise CliError(f"{flag} {value}: {error.strerror}") from None
        if not data:
            raise CliError(f"{flag} {value}: the file is empty")
        return kind_tensors(kind, data)
    if len(value) > kind.cli.max_request:
        raise CliError(
            f"{flag} given {len(value)} times; the ensemble takes at most "
            f"{kind.cli.max_request} sentences per request"
        )
    return kind_tensors(kind, value)


def run(ctx: Context, args: argparse.Namespace) -> int:
    from ml_platform.triton import validate_target_model
    from ml_platform.triton.archive_names import archive_file
    from ml_platform.triton.kinds import ARCHIVE_MODELS

    local = args.local is not None  # the local server needs no settings
    endpoint = None if local else args.endpoint or ctx.settings.inference.endpoints[0].name
    kind = next(k for k in KINDS if getattr(args, k.name) is not None)
    inputs, outputs = _request(kind, args)
    output = kind.output.name
    labels: list[str] = []
    if kind.cli.reply == "classes":
        if args.top_k < 1:
            raise CliError("--top-k must be at least 1")
        labels = _read_labels(args.labels)
    model = args.model or kind.default_archive

    started = time.monotonic()
    if args.local is not None:
        target = _local_target(args.local, args.model, args.target_model, kind.name)
        endpoint, attempts = f"local server ({args.local})", 1
        array = _invoke_local(args.local, target, inputs, outputs, output)
    elif args.triton_url:
        # Triton on EKS serves the archive's models by name: no S3 resolution.
        archive = args.target_model or archive_file(_logical(model))
        models = ARCHIVE_MODELS.get(archive)
        if models is None:
            raise CliError(f"--triton-url needs a known archive, got {archive!r}")
        endpoint, attempts, target = args.triton_url, 1, archive
        array = infer_on_triton(args.triton_url, models[0], inputs, outputs, output)
    else:
        if not (args.target_model or args.model):
            assert endpoint is not None
            model = default_model(ctx, endpoint, kind)
        target = args.target_model or _resolve(ctx, model)
        problem = validate_target_model(target)
        if problem:
            raise CliError(problem)
        assert endpoint is not None  # not --local: the endpoint came from the settings
        array, attempts = _invoke_sagemaker(ctx, args, endpoint, target, inputs, outputs, output)
    elapsed = time.monotonic() - started
    sentences = getattr(args, kind.name)
    if kind.cli.reply == "embeddings" and (array.ndim != 2 or array.shape[0] != len(sentences)):
        raise CliError(f"expected {len(sentences)} embeddings, got an array of shape {array.shape}")
    report: dict[str, Any] = {
        "endpoint": endpoint,
        "target_model": target,
        "attempts": attempts,
        "seconds": round(elapsed, 3),
    }
    if kind.cli.reply == "classes":
        report["classes"] = top_k(array[0], args.top_k, labels)
    else:
        report["embeddings"] = [
            embedding_summary(s, v) for s, v in zip(sentences, array, strict=True)
        ]
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{endpoint} / {target}: {attempts} attempt(s), {elapsed:.2f} s")
    for rank, item in enumerate(report.get("classes", []), start=1):
        print(f"{rank:>2}. {item['score']:.4f}  {item['label']}  (class {item['index']})")
    for item in report.get("embeddings", []):
        first = ", ".join(f"{v:+.4f}" for v in item["first"])
        print(
            f"{item['text']!r}: dimension {item['dimension']}, norm {item['norm']:.4f}, "
            f"first [{first}, ...]"
        )
    return 0
