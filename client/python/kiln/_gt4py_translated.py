"""
kiln.gt4py's second alias level, the translation alias (docs/gt4py.md,
"Ranks with their own tables"), and the data kilnd keeps with an alias.

GT4Py's key holds the connectivity tables by content, so every rank of a
decomposed run has its own GT4Py alias for a program whose code is the
same on every rank. Of GT4Py's DaCe translation only its first part, the
IR passes (apply_fieldview_transforms), reads the tables; what follows
(the SDFG, DaCe's transformations, the code) reads the program they
leave and the tables' types. So a rank whose GT4Py alias misses runs
the IR passes, and looks up the translation alias: the fingerprint of
the program they left, with its argument types, static arguments, the
offset provider's types and the column axis, under the same prefix
parts as the GT4Py alias (the workflow's steps and settings, the code,
the build view). A hit is another rank's program: no SDFG, no
transformation, no code generation, no compiler; this rank's GT4Py alias
is then pointed at the same entry (republish: a get by digest, which
kilnd answers from its index), so that its next start finds it without
the IR passes. A miss lowers the rest with the IR passes switched off
(they ran already) and publishes both aliases.

The translation alias's data holds, besides what loading needs, the
request kilnd built (its sources and arguments), which is what pointing
another alias at the entry takes.
"""

import dataclasses
import json
import zlib
from typing import Any

from . import _gt4py_identity as _identity, _session
from ._gt4py_report import say_once as _say_once
from .errors import KilnError

MAGIC = b"KILNGT4PY\x02"

# The request fields a translation alias's data keeps (kiln.dace's get).
_REQUEST_FIELDS = ("toolchain", "host_compiler", "args", "output", "pch", "label")


@dataclasses.dataclass(frozen=True)
class Translated:
    """A program after GT4Py's IR passes: the workflow that lowers the
    rest (its translator with the passes switched off), the program it
    takes, and the prefix of its translation alias."""

    executor: Any
    compilable: Any
    prefix: str


def of(executor, step, compilable):
    """The program after GT4Py's IR passes, or None: GT4Py's translation
    as it is (a translator of another kind, or one that skips the passes
    already; a program whose passes' output has no fingerprint). An error
    of the passes themselves is the program's: it is raised, as GT4Py's
    translation raises it."""
    from gt4py.next.otf import workflow
    from gt4py.next.program_processors.runners.dace.workflow import translation

    tr = executor.translation
    bare = tr.step if isinstance(tr, workflow.CachedStep) else tr
    if type(bare) is not translation.DaCeTranslator or bare.disable_itir_transforms:
        return None
    args = compilable.args
    # As DaCeTranslator.generate_sdfg runs them: in GT4Py's DaCe configuration.
    with translation.gtx_wfdcommon.dace_context(device_type=bare.device_type):
        ir = translation.itir_transforms.apply_fieldview_transforms(
            compilable.data,
            use_max_domain_range_on_unstructured_shift=bare.use_max_domain_range_on_unstructured_shift,
            offset_provider=args.offset_provider)
    try:
        program = _identity.fingerprint((ir, args.args, args.kwargs, args.offset_provider_type,
                                         args.column_axis, args.argument_descriptor_contexts))
        prefix = _identity.prefix(executor, step, "translated\0" + program)
    except Exception as e:
        _say_once("a program's IR has no fingerprint (%s: %s): it is lowered under its GT4Py "
                  "alias only" % (type(e).__name__, e))
        return None
    if tr is not bare:
        _made_as_cached(tr)
    rest = dataclasses.replace(bare, disable_itir_transforms=True)
    return Translated(dataclasses.replace(executor, translation=rest),
                      dataclasses.replace(compilable, data=ir), prefix)


def _made_as_cached(tr):
    """What GT4Py's translation cache makes when it is used, which the
    steps after it count on: GT4Py's cache folder (its file cache creates
    it with its parents; the compilation step's mkdir does not)."""
    from gt4py.next import config
    from gt4py.next.otf.compilation import cache

    try:
        cache.get_cache_base_path(config.BUILD_CACHE_LIFETIME).mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError):
        pass    # the compilation step says what is wrong, as without kiln


def alias(translated, step):
    """The translation alias as this process sees it now."""
    return _identity.alias(translated.prefix, _identity.build_view(step))


def data_with_request(meta, request):
    """A translation alias's data: meta (with the alias) and the request
    kiln.dace sent for the build, its sources as text."""
    req = {k: request[k] for k in _REQUEST_FIELDS if request.get(k) is not None}
    req["args"] = list(req.get("args", ()))
    req["pch"] = list(req.get("pch", ()))
    req["sources"] = {n: bytes(t).decode("latin-1") for n, t in request["sources"].items()}
    return load_data(dict(meta, request=req))


def republish(alias, data):
    """Points alias (this rank's GT4Py alias) at the entry of a translation
    alias whose data is data, with its own load data: the request again,
    which libkiln sends by digest and kilnd answers from its index. What
    fails is said once and costs only this: the next start runs the IR
    passes and finds the translation alias again."""
    k = _session.connection()
    if k is None:
        return False
    try:
        meta = read_load_data(data)
        req = meta.pop("request")
        sources = {n: t.encode("latin-1") for n, t in req.pop("sources").items()}
        k.get(sources=sources, alias=alias, alias_data=load_data(dict(meta, alias=alias)),
              load=False, **req)
    except (KilnError, ValueError, TypeError, KeyError, AttributeError) as e:
        _say_once("a program found under its translation alias could not be published "
                  "under this rank's own alias (%s: %s)" % (type(e).__name__, e))
        return False
    return True


def load_data(meta):
    """The data kilnd stores with the alias (docs/protocol.md, "Alias
    data"): MAGIC, then meta as zlib'd JSON. Not compiled into the library,
    so that every rank's alias of identical code (other connectivity
    tables, the same program) names one library built once."""
    return MAGIC + zlib.compress(json.dumps(meta, sort_keys=True).encode(), 6)


def read_load_data(data):
    """The meta of load_data's bytes (ValueError when damaged)."""
    if not isinstance(data, bytes) or not data.startswith(MAGIC):
        raise ValueError("the alias's data is not kiln.gt4py's")
    try:
        meta = json.loads(zlib.decompress(data[len(MAGIC):]))
    except (zlib.error, ValueError) as e:
        raise ValueError("the alias's data is damaged (%s)" % e)
    if not isinstance(meta, dict):
        raise ValueError("the alias's data is damaged")
    return meta
