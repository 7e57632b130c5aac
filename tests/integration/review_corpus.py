"""A small archive whose refresh fills the review queue with every kind of item the /review page handles: an
unreadable scanned page (real Tesseract reads nothing on it), garbled text layers the gate refuses, and an `hr`
page only some reviewers may see. Used by the API-level and the browser tests of the review workbench."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pymupdf
from PIL import Image

MANIFEST = (
    "defaults:\n  access: public\n  owner: Канцелярия\n"
    "rules:\n  - match: 'кадры/**'\n    access: hr\n    owner: Отдел кадров\n"
)
GARBLED = [
    "npoTOKon Necepa MocKBa OTPH 1031851041431 cocTaB KoMnccnn BbInoJIHeHo",
    "AkT npoBepkn cKJIaDa No 7 cocTaBJIeH KoMnccneN B npncyTcTBnn 3aBeDyl0lllero",
    "CnpaBKa BbIDaHa DJIR npeDcTaBJIeHnR no MecTy TpeGoBaHnR OTDeJIa KaDpoB",
    "BeDoMocTb nocTynJIeHnR MaTepnaJIoB Ha cKJIaD 3a MapT TeKyLLLero roDa",
]
FIRST_PAGE = "Опись дел архивного фонда за 2019 год. Первая страница описи набрана на компьютере."
CORRECTED = "Акт о списании огнетушителей: гидрант номер девять неисправен, вентиль заменён слесарем Кузьминым."


def noise_png(path: Path, seed: int) -> Path:
    """A smudged blank sheet: grey blots and a few specks, no word on it for any tier to read (and quick for
    Tesseract, unlike dense speckle, which it spends a minute on at 300 dpi)."""
    rng = np.random.default_rng(seed)
    pixels = np.full((1100, 850), 255, dtype=np.uint8)
    for _ in range(6):
        y, x = rng.integers(100, 1000), rng.integers(100, 750)
        pixels[y : y + rng.integers(20, 80), x : x + rng.integers(20, 80)] = rng.integers(120, 200)
    pixels[rng.random((1100, 850)) < 0.0005] = 0
    Image.fromarray(pixels, mode="L").save(path)
    return path


def scan_with_noise_page(path: Path, seed: int, first_page: str | None = None) -> Path:
    """A PDF whose last page is an unreadable scan; an optional first page of born-digital text."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = pymupdf.open()
    if first_page:
        doc.new_page(width=595, height=842).insert_textbox(
            pymupdf.Rect(60, 60, 540, 780),
            first_page,
            fontsize=12,
            fontname="dejavu",
            fontfile="/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        )
    png = noise_png(path.with_suffix(".png"), seed)
    doc.new_page(width=595, height=842).insert_image(pymupdf.Rect(0, 0, 595, 842), filename=str(png))
    png.unlink()
    doc.save(path)
    return path


def write_review_archive(root: Path) -> Path:
    (root / "старые").mkdir(parents=True)
    (root / "korpus.yaml").write_text(MANIFEST, encoding="utf-8")
    for n, text in enumerate(GARBLED, 1):
        (root / "старые" / f"слой_{n}.txt").write_text(text, encoding="utf-8")
    scan_with_noise_page(root / "сканы" / "опись.pdf", seed=3, first_page=FIRST_PAGE)
    scan_with_noise_page(root / "кадры" / "приказ.pdf", seed=5)
    return root


def copy_data(data: Path, target: Path) -> Path:
    """A private copy of a refreshed data directory (no writer is open on it), for a test that decides items."""
    shutil.copytree(data, target)
    return target
