"""The MIG profile table per GPU model, read once from ``profiles.yaml`` and checked strictly.

The table is data shipped with optsched, not user input: a table that does
not parse or breaks a rule (a start past the last memory slice, two profiles
with one id, a product claimed by two models) is a bug in optsched, reported
as :class:`MigTableError` naming the file, the model, the field and what was
expected. The node agent (which applies layouts) and the planner (which
chooses them) both read it through :func:`models` and :func:`model_for`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

TABLE_FILE = "profiles.yaml"

NVML_GI_PROFILES = frozenset(
    {
        "NVML_GPU_INSTANCE_PROFILE_1_SLICE",
        "NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1",
        "NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2",
        "NVML_GPU_INSTANCE_PROFILE_2_SLICE",
        "NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1",
        "NVML_GPU_INSTANCE_PROFILE_3_SLICE",
        "NVML_GPU_INSTANCE_PROFILE_4_SLICE",
        "NVML_GPU_INSTANCE_PROFILE_6_SLICE",
        "NVML_GPU_INSTANCE_PROFILE_7_SLICE",
        "NVML_GPU_INSTANCE_PROFILE_8_SLICE",
    }
)
"""The NVML GPU-instance profile enum names a table entry may use (as ``pynvml`` spells them)."""

_PROFILE_NAME = re.compile(r"^(?P<compute>[1-9])g\.[1-9][0-9]*gb(\+me)?$")
_GFD_SUFFIXES = (re.compile(r"-mig-.*$"), re.compile(r"-shared$"))


class MigTableError(Exception):
    """The shipped MIG profile table is broken: a bug in optsched, never the user's input."""


@dataclass(frozen=True)
class MigProfile:
    """One GPU instance profile of one GPU model."""

    name: str
    """As NVIDIA names it: ``1g.10gb``, ``1g.10gb+me``, ``3g.40gb``."""
    compute: int
    """Compute (SM) slices, out of the model's 7."""
    memory_slices: int
    """Memory slices it occupies on the 8-slice axis, from its start."""
    max_instances: int
    starts: tuple[int, ...]
    """The memory slices an instance of it may start at."""
    memory_mib: int
    nvml_profile: str
    """The ``NVML_GPU_INSTANCE_PROFILE_*`` enum name."""
    profile_id: int
    """The id nvidia-smi prints and NVML's placement and create calls take."""


@dataclass(frozen=True)
class MigModel:
    """One GPU model's MIG facts: the products it covers and its profiles."""

    name: str
    products: tuple[str, ...]
    """GPU Feature Discovery product names (``NVIDIA-H100-80GB-HBM3``)."""
    profiles: tuple[MigProfile, ...]
    family: str = ""
    """The word in a product name that names the family (``A100``), for names not in ``products``."""
    total_memory_mib: tuple[int, int] = (0, 0)
    """The range a GPU's total memory falls in, telling apart models of one family."""
    compute_slices: int = 7
    memory_slices: int = 8
    placements_inferred: bool = False
    """True where the placements were not measured on the model but taken from a sibling."""

    def profile(self, name: str) -> MigProfile | None:
        for candidate in self.profiles:
            if candidate.name == name:
                return candidate
        return None

    @property
    def profile_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.profiles)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _ProfileEntry(_Strict):
    name: str
    compute: int = Field(ge=1)
    memory_slices: int = Field(ge=1)
    max_instances: int = Field(ge=1)
    starts: list[int] = Field(min_length=1)
    memory_mib: int = Field(gt=0)
    nvml_profile: str
    profile_id: int = Field(ge=0)


class _ModelEntry(_Strict):
    name: str = Field(min_length=1)
    family: str = Field(min_length=1)
    source: str = Field(min_length=1)
    placements_source: str = Field(min_length=1)
    placements_inferred: bool
    memory_source: str = Field(min_length=1)
    total_memory_mib: list[int] = Field(min_length=2, max_length=2)
    compute_slices: int = Field(ge=1)
    memory_slices: int = Field(ge=1)
    products: list[str] = Field(min_length=1)
    profiles: list[_ProfileEntry] = Field(min_length=1)


class _Table(_Strict):
    version: int
    models: list[_ModelEntry] = Field(min_length=1)


def normalize_product(product: str) -> str:
    """A product name as GPU Feature Discovery writes it, case-folded, without GFD's sharing/MIG suffix."""
    name = "-".join(product.split()).casefold()
    for suffix in _GFD_SUFFIXES:
        name = suffix.sub("", name)
    return name


def parse_table(text: str, source: str = TABLE_FILE) -> tuple[MigModel, ...]:
    """The models in a profile table's YAML text; :class:`MigTableError` if it breaks any rule."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise MigTableError(f"{source}: not YAML: {exc}") from exc
    try:
        table = _Table.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise MigTableError(f"{source}: field {where}: {first['msg']}") from exc
    if table.version != 1:
        raise MigTableError(f"{source}: field version: expected 1, got {table.version}")
    models = tuple(_model(entry, f"{source}: model {entry.name}") for entry in table.models)
    _check_across_models(models, source)
    return models


def _model(entry: _ModelEntry, where: str) -> MigModel:
    low, high = entry.total_memory_mib
    if not 0 < low < high:
        raise MigTableError(f"{where}: field total_memory_mib: expected [low, high] with 0 < low < high")
    profiles = tuple(_profile(p, entry, f"{where}: profile {p.name}") for p in entry.profiles)
    for field, repeated in (
        ("name", _repeated([p.name for p in profiles])),
        ("profile_id", _repeated([p.profile_id for p in profiles])),
    ):
        if repeated:
            raise MigTableError(f"{where}: field profiles[].{field}: repeated {', '.join(repeated)}")
    return MigModel(
        name=entry.name,
        products=tuple(entry.products),
        profiles=profiles,
        family=entry.family,
        total_memory_mib=(low, high),
        compute_slices=entry.compute_slices,
        memory_slices=entry.memory_slices,
        placements_inferred=entry.placements_inferred,
    )


def _profile(entry: _ProfileEntry, model: _ModelEntry, where: str) -> MigProfile:
    match = _PROFILE_NAME.match(entry.name)
    if match is None:
        raise MigTableError(f"{where}: field name: expected <N>g.<M>gb or <N>g.<M>gb+me")
    if int(match["compute"]) != entry.compute:
        raise MigTableError(f"{where}: field compute: the name says {match['compute']}, got {entry.compute}")
    if entry.compute > model.compute_slices or entry.memory_slices > model.memory_slices:
        raise MigTableError(
            f"{where}: fields compute/memory_slices: expected at most "
            f"{model.compute_slices}/{model.memory_slices}, got {entry.compute}/{entry.memory_slices}"
        )
    if entry.starts != sorted(set(entry.starts)):
        raise MigTableError(f"{where}: field starts: expected distinct starts in increasing order")
    if entry.starts[0] < 0 or entry.starts[-1] + entry.memory_slices > model.memory_slices:
        raise MigTableError(
            f"{where}: field starts: every start + {entry.memory_slices} memory slices must fit in "
            f"slices 0..{model.memory_slices - 1}, got {entry.starts}"
        )
    if entry.max_instances > len(entry.starts):
        raise MigTableError(
            f"{where}: field max_instances: more instances than placements ({len(entry.starts)})"
        )
    if entry.nvml_profile not in NVML_GI_PROFILES:
        raise MigTableError(
            f"{where}: field nvml_profile: {entry.nvml_profile!r} is no NVML GPU instance profile"
        )
    return MigProfile(
        name=entry.name,
        compute=entry.compute,
        memory_slices=entry.memory_slices,
        max_instances=entry.max_instances,
        starts=tuple(entry.starts),
        memory_mib=entry.memory_mib,
        nvml_profile=entry.nvml_profile,
        profile_id=entry.profile_id,
    )


def _repeated(values: Sequence[object]) -> list[str]:
    return sorted({str(v) for v in values if values.count(v) > 1})


def _check_across_models(models: tuple[MigModel, ...], source: str) -> None:
    repeated = _repeated([m.name for m in models])
    if repeated:
        raise MigTableError(f"{source}: field models[].name: repeated {', '.join(repeated)}")
    owner: dict[str, str] = {}
    for model in models:
        for product in model.products:
            key = normalize_product(product)
            if key in owner:
                raise MigTableError(
                    f"{source}: model {model.name}: field products: {product} is also listed by {owner[key]}"
                )
            owner[key] = model.name
    for i, a in enumerate(models):
        for b in models[i + 1 :]:
            same_family = a.family.casefold() == b.family.casefold()
            if (
                same_family
                and a.total_memory_mib[0] <= b.total_memory_mib[1]
                and b.total_memory_mib[0] <= a.total_memory_mib[1]
            ):
                raise MigTableError(
                    f"{source}: models {a.name} and {b.name}: field total_memory_mib: ranges of one family "
                    "overlap, so a GPU's memory cannot tell them apart"
                )


@cache
def models() -> tuple[MigModel, ...]:
    """Every model in the shipped table (read and checked on first use)."""
    text = resources.files("optsched.mig").joinpath(TABLE_FILE).read_text(encoding="utf-8")
    return parse_table(text, source=f"optsched/mig/{TABLE_FILE}")


@cache
def _by_product() -> dict[str, MigModel]:
    return {normalize_product(p): m for m in models() for p in m.products}


def model_for(product: str, memory_mib: int = 0) -> MigModel | None:
    """The model a GPU is, by its product name, else by its family word and total memory; None if no MIG.

    ``product`` may be in NVML's form (``NVIDIA H100 80GB HBM3``) or GPU Feature
    Discovery's (``NVIDIA-H100-80GB-HBM3``, with or without GFD's ``-SHARED`` /
    ``-MIG-<profile>`` suffix). A name not listed matches only with ``memory_mib``
    given, when exactly one model has the name's family and that memory.
    """
    key = normalize_product(product)
    listed = _by_product().get(key)
    if listed is not None:
        return listed
    if memory_mib <= 0:
        return None
    words = set(key.split("-"))
    found = [
        m
        for m in models()
        if m.family.casefold() in words and m.total_memory_mib[0] <= memory_mib <= m.total_memory_mib[1]
    ]
    return found[0] if len(found) == 1 else None
