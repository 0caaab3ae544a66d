"""nano-vllm's scheduler loaded from a user's checkout, with no model, no GPU and no torch.

nano-vllm is not packaged under its name: its users have a clone of GeeeekExplorer/nano-vllm (an
unpacked wheel of a fork has the same layout). Its package ``__init__`` imports the model runner,
hence torch, transformers, triton and flash-attn, and its ``config.py`` reads a Hugging Face
config with transformers. The scheduler needs neither: :func:`load` executes only
``sampling_params.py``, ``engine/sequence.py``, ``engine/block_manager.py`` and
``engine/scheduler.py`` from the checkout, under empty parent packages and a stand-in
``nanovllm.config`` whose ``Config`` the scheduler only names in an annotation. What those four
files import beyond that (``xxhash`` and ``numpy``, for the block hashes) is the extra,
extras/nanovllm-cpu.txt. The modules are put in ``sys.modules`` only while they load, so a
second checkout (a patched copy) loads beside the first, and an installed ``nanovllm`` is left
alone.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from kvsched.checks.record.base import RecorderError

INSTALL = "install the nano-vllm recorder's extra first: pip install -r extras/nanovllm-cpu.txt"
FILES = (
    ("nanovllm.sampling_params", "nanovllm/sampling_params.py"),
    ("nanovllm.engine.sequence", "nanovllm/engine/sequence.py"),
    ("nanovllm.engine.block_manager", "nanovllm/engine/block_manager.py"),
    ("nanovllm.engine.scheduler", "nanovllm/engine/scheduler.py"),
)
"""What is executed from the checkout, in import order, as the module each file is."""
_STUBS = ("nanovllm", "nanovllm.engine", "nanovllm.config")


def check_checkout(src: Path) -> None:
    """Refuse ``src`` unless it holds the four files :func:`load` executes, saying which."""
    missing = [path for _, path in FILES if not (src / path).is_file()]
    if not missing:
        return
    hint = ""
    if (src / "engine" / "scheduler.py").is_file():
        hint = f"; {src} looks like the nanovllm package itself: pass its parent folder"
    raise RecorderError(
        f"--src {src} is not a nano-vllm checkout: expected {', '.join(missing)} under it (a "
        f"clone of GeeeekExplorer/nano-vllm, or an unpacked nano-vllm wheel){hint}"
    )


def load(src: Path) -> SimpleNamespace:
    """The checkout's ``Scheduler``, ``Sequence``, ``SequenceStatus`` and ``SamplingParams``,
    and whether this nano-vllm chunks prefills (HEAD since April 2026) or not (the classic)."""
    check_checkout(src)
    saved = {name: sys.modules.pop(name) for name in (*_STUBS, *dict(FILES)) if name in sys.modules}
    modules: dict[str, ModuleType] = {}
    try:
        for name in _STUBS:
            stub = ModuleType(name)
            stub.__path__ = []  # a package with nothing to find on disk: only what is loaded here
            sys.modules[name] = stub
        sys.modules["nanovllm.config"].Config = type("Config", (), {})  # type: ignore[attr-defined]
        for name, path in FILES:
            modules[name] = _execute(name, src / path)
    finally:
        for name in (*_STUBS, *dict(FILES)):
            sys.modules.pop(name, None)
        sys.modules.update(saved)
    scheduler = modules["nanovllm.engine.scheduler"]
    sequence = modules["nanovllm.engine.sequence"]
    for name, module, attribute in (
        ("engine/scheduler.py", scheduler, "Scheduler"),
        ("engine/sequence.py", sequence, "Sequence"),
        ("engine/sequence.py", sequence, "SequenceStatus"),
    ):
        if not hasattr(module, attribute):
            raise RecorderError(f"{src / 'nanovllm' / name} defines no {attribute}: not nano-vllm")
    postprocess = inspect.signature(scheduler.Scheduler.postprocess).parameters
    return SimpleNamespace(
        Scheduler=scheduler.Scheduler,
        Sequence=sequence.Sequence,
        SequenceStatus=sequence.SequenceStatus,
        SamplingParams=modules["nanovllm.sampling_params"].SamplingParams,
        # HEAD's postprocess takes is_prefill, as its chunks sample no token short of the prompt
        chunked="is_prefill" in postprocess,
    )


def _execute(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None  # a .py file always has both
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as error:
        if error.name and error.name.split(".")[0] == "nanovllm":
            raise RecorderError(
                f"{path} imports {error.name}, which the recorder does not load (it runs only "
                f"{', '.join(p for _, p in FILES)}): a nano-vllm version it does not know"
            ) from None
        raise RecorderError(f"{path} cannot be imported ({error}); {INSTALL}") from None
    except SyntaxError as error:
        raise RecorderError(f"{path} is not valid Python: {error}") from None
    return module


def build_scheduler(engine: SimpleNamespace, limits: Any, token_budget: int) -> Any:
    """nano-vllm's ``Scheduler`` over ``pool_pages`` blocks of ``page_size`` tokens, as its
    ``LLMEngine`` builds it: the block size set on ``Sequence`` first. The config's checks
    (a block size that is a multiple of 256, a model folder) are the model runner's and are not
    run: the scheduler's code works for any block size."""
    engine.Sequence.block_size = limits.page_size
    config = SimpleNamespace(
        max_num_seqs=limits.batch_limit,
        max_num_batched_tokens=token_budget,
        eos=-1,  # every request ignores end-of-sequence and ends at its max_tokens
        kvcache_block_size=limits.page_size,
        num_kvcache_blocks=limits.pool_pages,
    )
    return engine.Scheduler(config)
