"""Gymwright's own test runner, for `tests` checks: STANDARD LIBRARY ONLY, Python 3.8+.

This file is copied into the sandbox after the episode (by `testsuite.py`, into a fresh directory
under /tmp that no process of the agent's ever saw) and run there as

    python3 -I -S -B -X pycache_prefix=<runner dir>/pyc <runner dir>/runner.py   < config.json

from `/`: isolated (no PYTHON* variables, no user site, neither the script's nor the working
directory on sys.path), no `site` (no .pth files, no sitecustomize), no bytecode written and none
read from a workspace `__pycache__`. The configuration, with the nonce, arrives on stdin (never in
argv or the environment, which a process can read back from /proc) and stdin is closed before any
test code runs.

What it does, in order, before any code of the agent's is imported:

1. opens the report file (O_EXCL, 0600) and keeps the nonce only inside the report writer;
2. refuses a workspace that defines top-level modules named like a test module, a standard-library
   module the tests import or the `unittest` the runner uses (the verdict names them);
3. sets sys.path to: the standard library, the copied test files' folders, site-packages, then the
   workspace (the tested code is imported from there, after everything the grader trusts);
4. replaces TestCase's assertion methods with strict ones (builtin-typed values compare by exact
   type first: a `str` subclass whose __eq__ is always true is not "Fizz"; NaN equals NaN) and
   takes references to everything it needs later;
5. seals its own code (`_seal`): from then on every function of the runner reads its globals from a frozen
   copy, so a name swapped in its module (by the tested code, a thread of it, even for a moment) is never
   called, and the report writer is one of those sealed functions;
6. installs an audit hook that refuses tracing/profiling hooks, `gc` object walks, fork and any
   attribute change on the runner's classes (unittest.TestCase, the strict helpers, the pytest stand-in ...).

Then it loads each test module by explicit path (its source rewritten so that `==`, `!=`, `in`,
ordering comparisons and `assert` use the strict rules), runs exactly the test ids it was given
(the host fixed them from the files' source before anything ran), checks after each module and
each test that nothing it relies on was replaced (no thread of the tested code may outlive its test: the
test's own thread waits for them before it hands its outcome over), and writes ONE report: the nonce line and a JSON
object with each test's outcome. A test the report does not name failed; a run without the report
(os._exit, a kill, a timeout) failed; a run whose report says "tampered" failed as a whole.

Long (over 600 lines) because it is copied alone into the sandbox: it must be one self-contained,
standard-library-only file, so nothing of it can live in another module.
"""

import _thread
import ast
import builtins
import gc
import importlib
import importlib.machinery
import json
import os
import sys
import time
import types
import unittest
import unittest.case

MAX_MESSAGE = 500
MAX_DEPTH = 100
_NONE_TYPE = type(None)
_NUMBERS = (bool, int, float, complex)
_EXACT = frozenset(
    (str, bytes, bytearray, bool, int, float, complex, _NONE_TYPE, list, tuple, dict, set, frozenset, range)
)
_BUILTIN_BASES = (str, bytes, bytearray, int, float, complex, list, tuple, dict, set, frozenset, range)
_HASHABLE_EXACT = frozenset((str, bytes, bool, int, float, complex, _NONE_TYPE, tuple, frozenset))
# What would let the tested code reach the runner's own state or change how code runs: tracing (line jumps),
# object walks, other threads' frames, forks (a copy of the runner), raw memory (ctypes, /proc/<pid>/mem) and
# rewriting a function's code or defaults.
_BLOCKED_EVENTS = frozenset(
    (
        "sys.settrace",
        "sys.setprofile",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys._current_frames",
        "os.fork",
        "os.forkpty",
        "sys.monitoring.register_callback",
        "sys.monitoring.use_tool_id",
        "ctypes.call_function",
        "ctypes.cdata",
        "ctypes.cdata/buffer",
        "ctypes.string_at",
        "ctypes.wstring_at",
        "ctypes.PyObj_FromPtr",
        "ctypes.dlsym",
        "ctypes.dlsym/handle",
    )
)
_BLOCKED_ATTRIBUTES = frozenset(("__code__", "__defaults__", "__kwdefaults__", "__globals__"))

# Taken before any test code runs: the test code cannot swap what the runner calls.
_type = type
_len = len
_repr = repr
_isinstance = isinstance
_issubclass = issubclass
_AssertionError = AssertionError
_BaseException = BaseException
_SkipTest = unittest.SkipTest
_TestCase = unittest.TestCase
_FunctionType = types.FunctionType
_write = os.write
_exit = os._exit
_getpid = os.getpid
_listdir = os.listdir
_start_thread = _thread.start_new_thread
_allocate_lock = _thread.allocate_lock
_monotonic = time.monotonic
_sleep = time.sleep
_gc_isenabled = gc.isenabled
_gc_disable = gc.disable
THREAD_EXIT_S = 2.0


class Tampered(Exception):
    """Something the runner relies on was replaced while tests ran."""


# ---------------------------------------------------------------- pytest, without pytest

_APPROX = set()  # the exact types of trusted approx objects: the shim's, and real pytest's when it is installed
_FAILURES = set()  # real pytest's Failed (pytest.fail, pytest.raises), when it is installed
_SKIPS = set()  # real pytest's Skipped (pytest.skip)


def _classify(exc):
    """(outcome, message) of a test that raised `exc`."""
    if _isinstance(exc, _SkipTest) or _type(exc) in _SKIPS:
        return "skipped", "skipped: " + _message_of(exc) + " (a skipped test does not pass)"
    if _isinstance(exc, _AssertionError) or _type(exc) in _FAILURES:
        return "failed", _message_of(exc)
    return "error", _message_of(exc)


class _Mark:
    def __init__(self, name, args, kwargs):
        self.name, self.args, self.kwargs = name, args, kwargs


class _MarkFactory:
    def __getattr__(self, name):
        def mark(*args, **kwargs):
            if name not in ("parametrize", "skipif") and _len(args) == 1 and callable(args[0]) and not kwargs:
                return _store(args[0], _Mark(name, (), {}))
            return lambda function: _store(function, _Mark(name, args, kwargs))

        return mark


def _store(function, mark):
    marks = list(getattr(function, "pytestmark", []))
    marks.append(mark)
    function.pytestmark = marks
    return function


class _Param:
    def __init__(self, values, marks=(), id=None):
        self.values, self.marks, self.id = values, marks, id


class _Raises:
    def __init__(self, expected, match):
        self.expected, self.match, self.value, self.type = expected, match, None, None

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None:
            raise _AssertionError("DID NOT RAISE " + _shown(self.expected))
        if not _issubclass(kind, self.expected):
            return False
        if self.match is not None:
            import re

            if not re.search(self.match, str(value)):
                raise _AssertionError(
                    "the exception's message " + _shown(str(value)) + " does not match " + _shown(self.match)
                )
        self.value, self.type = value, kind
        return True


class _Approx:
    """`approx(expected, rel=1e-6, abs=1e-12)` for numbers and (nested) lists, tuples and dicts of numbers."""

    def __init__(self, expected, rel=None, abs=None):
        self.expected, self.rel, self.abs = expected, 1e-6 if rel is None else rel, 1e-12 if abs is None else abs

    def __repr__(self):
        return "approx(" + _shown(self.expected) + ")"

    def matches(self, actual, expected=None, depth=0):
        expected = self.expected if depth == 0 else expected
        if depth > MAX_DEPTH:
            return False
        te, ta = _type(expected), _type(actual)
        if te in (int, float) and ta in (int, float):
            if expected != expected or actual != actual:
                return expected != expected and actual != actual
            if expected in (float("inf"), float("-inf")):
                return actual == expected
            return abs_(actual - expected) <= max(self.abs, self.rel * abs_(expected))
        if te in (list, tuple) and ta is te:
            return _len(actual) == _len(expected) and all(
                self.matches(a, e, depth + 1) for a, e in zip(actual, expected)
            )
        if te is dict and ta is dict:
            return (
                _keys_exact(actual)
                and actual.keys() == expected.keys()
                and all(self.matches(actual[key], expected[key], depth + 1) for key in expected)
            )
        return False


abs_ = abs


def _approx_equal(approx, other):
    if _type(approx) is _Approx:
        return approx.matches(other)
    if not _all_builtin(other, 0):
        return False  # the tested code's own number types do not get to answer
    return truth(approx == other)


def _all_builtin(value, depth):
    if depth > MAX_DEPTH or _type(value) not in _EXACT:
        return False
    if _type(value) in (list, tuple, set, frozenset):
        return all(_all_builtin(item, depth + 1) for item in value)
    if _type(value) is dict:
        return all(_all_builtin(key, depth + 1) and _all_builtin(item, depth + 1) for key, item in value.items())
    return True


def pytest_shim():
    """A stand-in for `pytest` (a class) with what plain test files use most (raises, approx, mark.parametrize/skip/skipif,
    param, skip, fail), for sandboxes without pytest. Fixtures beyond tmp_path are not supported."""

    def raises(expected, *args, match=None, **kwargs):
        if args:
            with _Raises(expected, match):
                args[0](*args[1:], **kwargs)
            return None
        return _Raises(expected, match)

    def skip(reason="", allow_module_level=False):
        raise _SkipTest(reason)

    def fail(reason="", pytrace=True):
        raise _AssertionError(reason)

    def fixture(*args, **kwargs):
        raise LookupError("pytest fixtures are not supported by Gymwright's runner (only tmp_path)")

    def param(*values, marks=(), id=None):
        return _Param(values, marks, id)

    # A class, not a module: swapping one of its names is an attribute change on a class, which the audit hook
    # refuses (a module's attributes change unseen).
    return type(
        "pytest",
        (),
        {
            "__file__": "<gymwright pytest shim>",
            "raises": staticmethod(raises),
            "skip": staticmethod(skip),
            "fail": staticmethod(fail),
            "fixture": staticmethod(fixture),
            "param": staticmethod(param),
            "approx": _Approx,
            "mark": _MarkFactory(),
        },
    )


def install_pytest(trusted_path):
    """The real pytest when it is installed outside the workspace, else the shim; imported before any tested
    code runs, and its approx classes trusted by exact type."""
    if importlib.machinery.PathFinder.find_spec("pytest", trusted_path) is not None:
        saved = sys.path[:]
        sys.path[:] = trusted_path
        try:
            import pytest  # noqa: F401 - from site-packages, before any tested code
            from _pytest import python_api
        finally:
            sys.path[:] = saved
        from _pytest import outcomes

        _FAILURES.add(outcomes.Failed)
        _SKIPS.add(outcomes.Skipped)
        stack = [python_api.ApproxBase]
        while stack:
            cls = stack.pop()
            _APPROX.add(cls)
            stack.extend(cls.__subclasses__())
        return sys.modules["pytest"]
    module = pytest_shim()
    sys.modules["pytest"] = module
    _APPROX.add(_Approx)
    return module


def parametrized(function, index):
    """The keyword arguments of parameter set `index` of a test under one `pytest.mark.parametrize`."""
    marks = [mark for mark in getattr(function, "pytestmark", []) if getattr(mark, "name", None) == "parametrize"]
    if _len(marks) != 1:
        raise LookupError("a test needs exactly one pytest.mark.parametrize with a literal list in Gymwright's runner")
    names, values = marks[0].args[0], list(marks[0].args[1])
    if _type(names) is str:
        names = [name.strip() for name in names.split(",") if name.strip()]
    value = values[index]
    if _type(value).__name__ in ("ParameterSet", "_Param"):
        value = value.values if _len(names) > 1 else value.values[0]
    if _len(names) == 1:
        return {names[0]: value}
    return dict(zip(names, value))


def _marked(function, name):
    return [mark for mark in getattr(function, "pytestmark", []) if getattr(mark, "name", None) == name]


# ---------------------------------------------------------------- strict values


def _shown(value):
    try:
        text = _repr(value)
    except _BaseException:  # a value's own __repr__ is the tested code's
        return "<" + _type(value).__name__ + " object>"
    if _type(text) is not str:
        return "<" + _type(value).__name__ + " object>"
    return text if _len(text) <= 200 else text[:197] + "..."


def _builtin_subclass(cls):
    return cls not in _EXACT and _issubclass(cls, _BUILTIN_BASES)


def _own_code(cls, names):
    """True if `cls` (not a builtin) decides one of these special methods with Python code of its own."""
    for klass in cls.__mro__:
        if klass in _EXACT or klass is object:
            return False
        for name in names:
            if _isinstance(klass.__dict__.get(name), _FunctionType):
                return True
    return False


def truth(value):
    """bool(value), refused when the value's class decides it with Python code (its own __bool__/__len__)."""
    cls = _type(value)
    if cls is bool:
        return value
    if cls in _EXACT:
        return bool(value)
    if _own_code(cls, ("__bool__", "__len__")):
        raise _AssertionError(
            "the truth of a " + cls.__name__ + " object is decided by its own __bool__/__len__; "
            "the test expected a builtin value"
        )
    return bool(value)


def _keys_exact(mapping):
    return all(_type(key) in _HASHABLE_EXACT for key in mapping)


def equal(a, b, depth=0):
    """Equality by value for builtin-typed values: both sides of exact builtin types (no subclasses), compared
    by the builtin rules (NaN equals NaN); values of the tested code's own classes (neither side builtin)
    compare by their own ==, as Python would."""
    if depth > MAX_DEPTH:
        return False
    ta, tb = _type(a), _type(b)
    if tb in _APPROX:
        return _approx_equal(b, a)
    if ta in _APPROX:
        return _approx_equal(a, b)
    exact_a, exact_b = ta in _EXACT, tb in _EXACT
    if not exact_a and not exact_b:
        if _builtin_subclass(ta) or _builtin_subclass(tb):
            return False
        return truth(a == b)
    if not (exact_a and exact_b):
        return False
    if ta in _NUMBERS and tb in _NUMBERS:
        if ta is float and tb is float and a != a and b != b:
            return True
        if ta is complex or tb is complex:
            return complex(a) == complex(b)
        return a == b
    if ta is not tb:
        return False
    if ta in (list, tuple):
        return _len(a) == _len(b) and all(equal(x, y, depth + 1) for x, y in zip(a, b))
    if ta is dict:
        if _len(a) != _len(b):
            return False
        if _keys_exact(a) and _keys_exact(b):
            if a.keys() != b.keys():
                return False
        else:
            if any(_builtin_subclass(_type(key)) for key in a) or any(_builtin_subclass(_type(key)) for key in b):
                return False
            if not truth(a.keys() == b.keys()):
                return False
        return all(equal(value, b[key], depth + 1) for key, value in a.items())
    if ta in (set, frozenset):
        if _keys_exact(a) and _keys_exact(b):
            return a == b
        if any(_builtin_subclass(_type(item)) for item in a) or any(_builtin_subclass(_type(item)) for item in b):
            return False
        return truth(a == b)
    return a == b  # str, bytes, bytearray, None, range: exact builtin types on both sides


def contains(item, container):
    """`item in container`, by `equal` for builtin containers; refused for a builtin subclass."""
    tc = _type(container)
    if tc in (str, bytes, bytearray):
        ti = _type(item)
        if ti not in _EXACT:
            return False
        return item in container
    if tc in (list, tuple):
        return any(equal(item, element) for element in container)
    if tc in (dict, set, frozenset):
        if _type(item) in _HASHABLE_EXACT and _keys_exact(container):
            return item in container
        return any(equal(item, element) for element in container)
    if tc in (range,) or _type(container).__name__ in ("dict_keys", "dict_values", "dict_items"):
        return any(equal(item, element) for element in container)
    if _builtin_subclass(tc) or _builtin_subclass(_type(item)):
        return False
    return truth(item in container)


def _ordered(op, a, b):
    ta, tb = _type(a), _type(b)
    if ta in _EXACT or tb in _EXACT or _builtin_subclass(ta) or _builtin_subclass(tb):
        if ta not in _EXACT or tb not in _EXACT:
            return False
    if op == "<":
        result = a < b
    elif op == "<=":
        result = a <= b
    elif op == ">":
        result = a > b
    else:
        result = a >= b
    return truth(result)


def compare(op, a, b):
    """One comparison `a op b` under the strict rules (the rewritten test code calls this)."""
    if op == "==":
        return equal(a, b)
    if op == "!=":
        return not equal(a, b)
    if op == "in":
        return contains(a, b)
    if op == "not in":
        return not contains(a, b)
    if op == "is":
        return a is b
    if op == "is not":
        return a is not b
    return _ordered(op, a, b)


def chain(first, rest):
    """`a op1 b op2 c ...`: `rest` is ((op, thunk), ...), each operand evaluated once, left to right, lazily."""
    left = first
    for op, thunk in rest:
        right = thunk()
        if not compare(op, left, right):
            return False
        left = right
    return True


def assert_compare(op, a, b, source, message):
    if not compare(op, a, b):
        detail = "assert " + source + " (" + _shown(a) + " " + op + " " + _shown(b) + ")"
        if _type(a) is not _type(b) and (_type(a) in _EXACT or _type(b) in _EXACT):
            detail += "; types " + _type(a).__name__ + " and " + _type(b).__name__
        raise _AssertionError(_with_message(detail, message))


def assert_true(value, source, message):
    if not truth(value):
        raise _AssertionError(_with_message("assert " + source, message))


def _with_message(detail, message):
    if message is None:
        return detail
    text = message() if callable(message) else message
    return _shown(text) + ": " + detail if _type(text) is not str else text + ": " + detail


class _Strict:
    """What the rewritten test code calls (`__gymwright_strict__.compare(...)`): a class, not a namespace object,
    so that swapping one of its helpers is an attribute change on a class, which the audit hook refuses."""

    compare = staticmethod(compare)
    chain = staticmethod(chain)
    truth = staticmethod(truth)
    assert_compare = staticmethod(assert_compare)
    assert_true = staticmethod(assert_true)


# ---------------------------------------------------------------- strict assertion methods


def _fail(case, message, default):
    raise _AssertionError(default if message is None else str(message) + " : " + default)


def _assert_equal(self, first, second, msg=None):
    if not equal(first, second):
        detail = _shown(first) + " != " + _shown(second)
        if _type(first) is not _type(second):
            detail += " (types " + _type(first).__name__ + " and " + _type(second).__name__ + ")"
        _fail(self, msg, detail)


def _assert_not_equal(self, first, second, msg=None):
    if equal(first, second):
        _fail(self, msg, _shown(first) + " == " + _shown(second))


def _typed_equal(kind):
    def method(self, first, second, msg=None, seq_type=None):
        expected = seq_type or kind
        for value in (first, second):
            if expected is not None and not _issubclass(_type(value), expected):
                _fail(self, msg, "expected a " + expected.__name__ + ", got a " + _type(value).__name__)
        _assert_equal(self, first, second, msg)

    return method


def _assert_true(self, expr, msg=None):
    if not truth(expr):
        _fail(self, msg, _shown(expr) + " is not true")


def _assert_false(self, expr, msg=None):
    if truth(expr):
        _fail(self, msg, _shown(expr) + " is not false")


def _assert_in(self, member, container, msg=None):
    if not contains(member, container):
        _fail(self, msg, _shown(member) + " not found in " + _shown(container))


def _assert_not_in(self, member, container, msg=None):
    if contains(member, container):
        _fail(self, msg, _shown(member) + " unexpectedly found in " + _shown(container))


def _ordering(op, words):
    def method(self, a, b, msg=None):
        if not _ordered(op, a, b):
            _fail(self, msg, _shown(a) + " not " + words + " " + _shown(b))

    return method


def _assert_almost_equal(self, first, second, places=None, msg=None, delta=None):
    if _type(first) not in _NUMBERS or _type(second) not in _NUMBERS:
        if (
            _type(first) in _EXACT
            or _type(second) in _EXACT
            or _builtin_subclass(_type(first))
            or _builtin_subclass(_type(second))
        ):
            if not equal(first, second):
                _fail(self, msg, _shown(first) + " != " + _shown(second) + " (not numbers of builtin types)")
            return
        return _ORIGINAL["assertAlmostEqual"](self, first, second, places=places, msg=msg, delta=delta)
    if equal(first, second):
        return
    difference = abs(first - second)
    if delta is not None:
        if difference <= delta:
            return
        _fail(self, msg, _shown(first) + " != " + _shown(second) + " within " + _shown(delta) + " delta")
    if round(difference, 7 if places is None else places) == 0:
        return
    _fail(
        self,
        msg,
        _shown(first) + " != " + _shown(second) + " within " + str(7 if places is None else places) + " places",
    )


def _assert_not_almost_equal(self, first, second, places=None, msg=None, delta=None):
    try:
        _assert_almost_equal(self, first, second, places=places, delta=delta)
    except _AssertionError:
        return
    _fail(self, msg, _shown(first) + " == " + _shown(second) + " (almost)")


def _assert_count_equal(self, first, second, msg=None):
    left, right = list(first), list(second)
    for item in left:
        for index, other in enumerate(right):
            if equal(item, other):
                del right[index]
                break
        else:
            _fail(self, msg, "element counts differ: " + _shown(item) + " is not matched")
    if right:
        _fail(self, msg, "element counts differ: " + _shown(right[0]) + " is not matched")


def _assert_is_instance(self, obj, cls, msg=None):
    if not _issubclass(_type(obj), cls):
        _fail(self, msg, _shown(obj) + " is not an instance of " + _shown(cls))


def _assert_not_is_instance(self, obj, cls, msg=None):
    if _issubclass(_type(obj), cls):
        _fail(self, msg, _shown(obj) + " is an instance of " + _shown(cls))


_STRICT = {
    "assertEqual": _assert_equal,
    "assertEquals": _assert_equal,
    "assertNotEqual": _assert_not_equal,
    "assertNotEquals": _assert_not_equal,
    "assertListEqual": _typed_equal(list),
    "assertTupleEqual": _typed_equal(tuple),
    "assertDictEqual": _typed_equal(dict),
    "assertSetEqual": _typed_equal(None),
    "assertSequenceEqual": _typed_equal(None),
    "assertMultiLineEqual": _typed_equal(str),
    "assertTrue": _assert_true,
    "assert_": _assert_true,
    "failUnless": _assert_true,
    "assertFalse": _assert_false,
    "failIf": _assert_false,
    "assertIn": _assert_in,
    "assertNotIn": _assert_not_in,
    "assertLess": _ordering("<", "less than"),
    "assertLessEqual": _ordering("<=", "less than or equal to"),
    "assertGreater": _ordering(">", "greater than"),
    "assertGreaterEqual": _ordering(">=", "greater than or equal to"),
    "assertAlmostEqual": _assert_almost_equal,
    "assertAlmostEquals": _assert_almost_equal,
    "assertNotAlmostEqual": _assert_not_almost_equal,
    "assertCountEqual": _assert_count_equal,
    "assertIsInstance": _assert_is_instance,
    "assertNotIsInstance": _assert_not_is_instance,
}
_ORIGINAL = {}


class _Method(property):
    """A TestCase method as a read-only data descriptor: an attribute of the same name in a test case's own __dict__
    (the tested code reaches `self` through a traceback's frames) never shadows it; on the class it is the plain
    function (`unittest.TestCase.setUp(self)` still works)."""

    def __get__(self, instance, owner=None):
        return self.fget(instance)


def _method_property(function):
    def bound(self, _function=function, _bind=types.MethodType):
        return _function if self is None else _bind(_function, self)

    return _Method(bound, doc=getattr(function, "__doc__", None))


def install_strict_assertions():
    for name, method in _STRICT.items():
        if name in _TestCase.__dict__:
            _ORIGINAL[name] = _TestCase.__dict__[name]
            setattr(_TestCase, name, method)
    # The equality dispatch table of the originals is bypassed: every typed method above is ours.
    _TestCase.failureException = _AssertionError


def freeze_test_case_methods():
    """TestCase's own methods (unittest's assertions and `fail`, and the strict ones) become read-only descriptors
    (`_Method`). Called once the strict methods are sealed."""
    for name, member in list(vars(_TestCase).items()):
        if _type(member) is _FunctionType and not name.startswith("__"):
            setattr(_TestCase, name, _method_property(member))


# ---------------------------------------------------------------- test source rewriting

_OPS = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Is: "is",
    ast.IsNot: "is not",
}
_HELPER = "__gymwright_strict__"


def _helper(name, node):
    return ast.copy_location(ast.Attribute(value=ast.Name(id=_HELPER, ctx=ast.Load()), attr=name, ctx=ast.Load()), node)


def _call(name, args, node):
    return ast.copy_location(ast.Call(func=_helper(name, node), args=args, keywords=[]), node)


class StrictRewriter(ast.NodeTransformer):
    """Comparisons through `compare`/`chain`, and `assert` through `assert_compare`/`assert_true`."""

    def __init__(self, source):
        self.source = source

    def _text(self, node):
        try:
            text = ast.get_source_segment(self.source, node) or ""
        except Exception:  # noqa: BLE001
            text = ""
        return text if _len(text) <= 300 else text[:297] + "..."

    def visit_Compare(self, node):
        self.generic_visit(node)
        ops = [_OPS.get(_type(op)) for op in node.ops]
        if None in ops or all(op in ("is", "is not") for op in ops):
            return node
        if _len(ops) == 1:
            return _call("compare", [ast.Constant(ops[0]), node.left, node.comparators[0]], node)
        rest = ast.Tuple(
            elts=[
                ast.Tuple(
                    elts=[
                        ast.Constant(op),
                        ast.Lambda(
                            args=ast.arguments(
                                posonlyargs=[],
                                args=[],
                                vararg=None,
                                kwonlyargs=[],
                                kw_defaults=[],
                                kwarg=None,
                                defaults=[],
                            ),
                            body=comparator,
                        ),
                    ],
                    ctx=ast.Load(),
                )
                for op, comparator in zip(ops, node.comparators)
            ],
            ctx=ast.Load(),
        )
        return _call("chain", [node.left, rest], node)

    def visit_Assert(self, node):
        source = self._text(node.test)
        message = ast.Constant(None)
        if node.msg is not None:
            message = ast.Lambda(
                args=ast.arguments(
                    posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]
                ),
                body=self.visit(node.msg),
            )
        test = node.test
        if _isinstance(test, ast.Compare) and _len(test.ops) == 1 and _OPS.get(_type(test.ops[0])):
            left, right = self.visit(test.left), self.visit(test.comparators[0])
            call = _call(
                "assert_compare",
                [ast.Constant(_OPS[_type(test.ops[0])]), left, right, ast.Constant(source), message],
                node,
            )
        else:
            call = _call("assert_true", [self._truthy(self.visit(test)), ast.Constant(source), message], node)
        return ast.copy_location(ast.Expr(value=call), node)

    def _truthy(self, node):
        """In a truth context, `and`/`or`/`not` operands go through `truth` too."""
        if _isinstance(node, ast.BoolOp):
            node.values = [_call("truth", [self._truthy(value)], value) for value in node.values]
        elif _isinstance(node, ast.UnaryOp) and _isinstance(node.op, ast.Not):
            node.operand = _call("truth", [self._truthy(node.operand)], node.operand)
        return node


def rewrite(source, filename):
    tree = ast.parse(source, filename, "exec")
    tree = StrictRewriter(source).visit(tree)
    ast.fix_missing_locations(tree)
    return compile(tree, filename, "exec", dont_inherit=True)


def code_objects(code):
    """Every code object compiled from one module (functions and classes at any depth)."""
    found = [code]
    for const in code.co_consts:
        if _isinstance(const, types.CodeType):
            found.extend(code_objects(const))
    return found


# ---------------------------------------------------------------- the run


def _message_of(exc):
    name = _type(exc).__name__
    try:
        text = str(exc)
    except _BaseException:
        text = ""
    if _type(text) is not str:
        text = ""
    text = name + (": " + text if text else "")
    return text if _len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def _json(value):
    """A small JSON writer for the report (str, int, bool, None, list, dict): the json module's encoder
    is reachable from test code; this one is not swapped by patching a module."""
    tv = _type(value)
    if value is None:
        return "null"
    if tv is bool:
        return "true" if value else "false"
    if tv is int:
        return str(value)
    if tv is str:
        out = ['"']
        for char in value:
            code = ord(char)
            if char == '"' or char == "\\":
                out.append("\\" + char)
            elif code < 0x20 or 0xD800 <= code <= 0xDFFF or code == 0x7F:
                out.append("\\u%04x" % code)
            else:
                out.append(char)
        out.append('"')
        return "".join(out)
    if tv is list:
        return "[" + ",".join(_json(item) for item in value) + "]"
    if tv is dict:
        return "{" + ",".join(_json(key) + ":" + _json(item) for key, item in value.items()) + "}"
    return _json(str(value))


def _make_reporter(fd, nonce):
    pid = _getpid()

    def report(document):
        if _getpid() != pid:  # a forked copy of the runner never reports
            _exit(70)
        data = (nonce + "\n" + _json(document) + "\n").encode("utf-8", "surrogatepass")
        view = memoryview(data)
        while view:
            written = _write(fd, view)
            view = view[written:]

    return report


def _workspace_shadows(workspace, names):
    """Top-level entries of the workspace that would be imported as one of `names`."""
    found = []
    try:
        entries = sorted(os.listdir(workspace))
    except OSError:
        return found
    suffixes = tuple(importlib.machinery.all_suffixes())
    for entry in entries:
        stem = None
        full = os.path.join(workspace, entry)
        if os.path.isdir(full) and not os.path.islink(full):
            stem = entry
        elif os.path.islink(full):
            stem = entry.split(".", 1)[0]
        else:
            for suffix in suffixes:
                if entry.endswith(suffix):
                    stem = entry[: -_len(suffix)]
                    break
            if stem is None and "." in entry:
                stem = entry.split(".", 1)[0] if entry.endswith((".pyc", ".so", ".pyd", ".pyw")) else None
        if stem in names:
            found.append(entry)
    return found


def _stdlib_names(imports, stdlib_path):
    names = set()
    known = getattr(sys, "stdlib_module_names", None)
    for name in imports:
        if known is not None:
            if name in known:
                names.add(name)
        elif (
            importlib.machinery.PathFinder.find_spec(name, stdlib_path) is not None or name in sys.builtin_module_names
        ):
            names.add(name)
    return names


class Guard:
    """What the runner relies on, taken once everything is set up; `check()` says what changed since."""

    def __init__(self, runner_globals, modules):
        self.builtins = dict(vars(builtins))
        self.testcase = dict(vars(_TestCase))
        self.runner = dict(runner_globals)
        self.runner_globals = runner_globals
        self.modules = {
            name: sys.modules.get(name)
            for name in ("builtins", "sys", "os", "unittest", "unittest.case", "__main__", "ast", "types")
        }
        self.test_modules = {}
        self.violations = []

    def watch_module(self, module, helper):
        self.test_modules[module.__name__] = (module, helper, module.__dict__.get(_HELPER))
        self.definitions = getattr(self, "definitions", [])
        self.bound = getattr(self, "bound", [])

    def watch_definitions(self, module, codes, expected_imports):
        """Once the module ran: its functions and classes (and their methods) stay the ones it defined, and
        the names it imported from the standard library stay the objects the runner resolved itself."""
        for name, value in expected_imports.items():
            self.bound.append((module, name, value))
        for name, value in list(module.__dict__.items()):
            if _isinstance(value, _FunctionType) and value.__code__ in codes:
                self.definitions.append((module.__dict__, name, value, module.__name__ + "." + name))
            elif _isinstance(value, type) and getattr(value, "__module__", None) == module.__name__:
                for attribute, member in list(value.__dict__.items()):
                    if _isinstance(member, _FunctionType) and member.__code__ in codes:
                        self.definitions.append(
                            (value.__dict__, attribute, member, module.__name__ + "." + name + "." + attribute)
                        )
                self.definitions.append((module.__dict__, name, value, module.__name__ + "." + name))

    def watch_namespaces(self, modules):
        """Modules whose names the tests call through (unittest, pytest): none of their names may be rebound."""
        self.namespaces = getattr(self, "namespaces", [])
        for module in modules:
            if module is not None:
                self.namespaces.append((module.__name__, module.__dict__, dict(module.__dict__)))

    def remember_modules(self, names):
        """Standard-library modules the tests import, imported by the runner before the tested code runs."""
        for name in names:
            if name in sys.modules and name not in self.modules:
                self.modules[name] = sys.modules[name]

    def check(self):
        if self.violations:
            return self.violations[0]
        if sys.gettrace() is not None or sys.getprofile() is not None:
            return "a trace or profile function was installed"
        for name, value in self.builtins.items():
            if vars(builtins).get(name, _MISSING) is not value:
                return "the builtin " + name + " was replaced"
        for name, value in self.testcase.items():
            if _TestCase.__dict__.get(name, _MISSING) is not value:
                return "unittest.TestCase." + name + " was replaced"
        for name, value in self.runner.items():
            if self.runner_globals.get(name, _MISSING) is not value:
                return "the runner's " + name + " was replaced"
        for name, module in self.modules.items():
            if sys.modules.get(name) is not module:
                return "sys.modules[" + _repr(name) + "] was replaced"
        for module_name, namespace, snapshot in getattr(self, "namespaces", []):
            for name, value in snapshot.items():
                if namespace.get(name, _MISSING) is not value:
                    return module_name + "." + name + " was replaced"
        for namespace, name, value, shown in getattr(self, "definitions", []):
            if namespace.get(name, _MISSING) is not value:
                return "the test file's " + shown + " was replaced"
        for module, name, value in getattr(self, "bound", []):
            if module.__dict__.get(name, _MISSING) is not value:
                return "the test module's " + name + " is not the " + name + " it imported"
        for name, (module, helper, injected) in self.test_modules.items():
            if sys.modules.get(name) is not module:
                return "the test module " + name + " was replaced in sys.modules"
            if module.__dict__.get(_HELPER) is not injected or injected is not helper:
                return "the test module " + name + "'s comparison helper was replaced"
        return None


_MISSING = object()


def _audit_hook(guard, extra=()):
    protected = (
        (_TestCase, Guard, Tampered, _Approx, _Raises, _Mark, _MarkFactory, _Param, _Strict, _Method)
        + tuple(extra)
        + tuple(_APPROX)
        + tuple(_FAILURES)
        + tuple(_SKIPS)
    )

    def hook(event, args):
        if event in _BLOCKED_EVENTS:
            guard.violations.append("the tested code called " + event)
            raise RuntimeError(event + " is not allowed while Gymwright's runner runs tests")
        if event == "sys._getframe":
            # Callers in the standard library (logging, warnings, typing, namedtuple) take a ValueError as
            # "no such frame"; the tested code gets no way up the stack from here.
            raise ValueError("sys._getframe is not available while Gymwright's runner runs tests")
        if event == "object.__setattr__" and args:
            if any(args[0] is cls for cls in protected):
                guard.violations.append("the tested code set " + _repr(args[1]) + " on " + args[0].__name__)
                raise RuntimeError("the runner's classes are read-only while tests run")
            if _type(args[1]) is str and args[1] in _BLOCKED_ATTRIBUTES:
                guard.violations.append("the tested code replaced a function's " + args[1])
                raise RuntimeError("a function's " + args[1] + " cannot be replaced while tests run")
        if (
            event == "open"
            and args
            and _type(args[0]) is str
            and args[0].startswith("/proc/")
            and args[0].rstrip("/").endswith(("/mem", "/maps", "/pagemap"))
        ):
            guard.violations.append("the tested code opened " + args[0])
            raise RuntimeError("process memory is not readable while Gymwright's runner runs tests")

    return hook


def _test_function(module, test_id, codes, style):
    """(class or None, callable, name) for a test id, checked to be code compiled from the test file."""
    parts = test_id.split("::")[1:]
    if parts[-1].endswith("]") and "[" in parts[-1]:
        parts[-1] = parts[-1][: parts[-1].index("[")]
    if _len(parts) == 1:
        function = module.__dict__.get(parts[0])
        if not _isinstance(function, _FunctionType) or function.__code__ not in codes:
            raise LookupError("test function " + parts[0] + " is not the one the test file defines")
        return None, function, parts[0]
    cls = module.__dict__.get(parts[0])
    if not _isinstance(cls, type):
        raise LookupError("test class " + parts[0] + " is not defined by the test file")
    function = None
    for klass in cls.__mro__:
        if parts[1] in klass.__dict__:
            function = klass.__dict__[parts[1]]
            break
    if not _isinstance(function, _FunctionType) or function.__code__ not in codes:
        raise LookupError("test method " + parts[0] + "." + parts[1] + " is not the one the test file defines")
    return cls, function, parts[1]


def _fixtures(function, temp_root, counter, test_id=""):
    code = function.__code__
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    kwargs = {}
    last = test_id.rsplit("::", 1)[-1]
    if last.endswith("]") and "[" in last:
        kwargs.update(parametrized(function, int(last[last.index("[") + 1 : -1])))
    for mark in _marked(function, "skip"):
        raise _SkipTest(str(mark.kwargs.get("reason", mark.args[0] if mark.args else "")))
    for mark in _marked(function, "skipif"):
        if mark.args and mark.args[0]:
            raise _SkipTest(str(mark.kwargs.get("reason", "")))
    if _marked(function, "xfail"):
        raise LookupError("pytest.mark.xfail is not supported by Gymwright's runner")
    for name in names:
        if name in ("self", "cls") or name in kwargs:
            continue
        if name in ("tmp_path", "tmpdir"):
            import pathlib

            counter[0] += 1
            path = os.path.join(temp_root, "t" + str(counter[0]))
            os.makedirs(path)
            kwargs[name] = pathlib.Path(path)
        else:
            defaults = function.__defaults__ or ()
            if names.index(name) >= _len(names) - _len(defaults):
                continue
            raise LookupError(
                "fixture " + _repr(name) + " is not supported by Gymwright's runner "
                "(only tmp_path); give the argument a default or drop it"
            )
    return kwargs


def _is_async(function):
    return bool(function.__code__.co_flags & 0x80)


def run_one(module, test_id, codes, style, class_state, temp_root, counter, is_case=False):
    """(outcome, message) of one test. `is_case`: the test file's source makes its class a unittest.TestCase."""
    try:
        cls, function, name = _test_function(module, test_id, codes, style)
    except LookupError as exc:
        return "error", str(exc)
    if is_case and (cls is None or not _issubclass(cls, _TestCase)):
        return (
            "tampered",
            "the class of " + test_id + " is not a unittest.TestCase when it runs (its base was replaced)",
        )
    if _is_async(function):
        return "error", "async tests are not supported by Gymwright's runner"
    if cls is None:
        try:
            result = function(**_fixtures(function, temp_root, counter, test_id))
        except _BaseException as exc:  # SystemExit and KeyboardInterrupt fail the test too
            return _classify(exc)
        return ("passed", "") if result is None else ("error", "a test function returned a value instead of None")
    if _issubclass(cls, _TestCase):
        return _run_case(cls, function, name, class_state)
    # A plain `Test*` class (pytest style): a fresh instance per test, setup_method/teardown_method if defined.
    try:
        instance = cls()
        setup = getattr(instance, "setup_method", None)
        if setup is not None:
            setup(function)
        try:
            result = function(instance, **_fixtures(function, temp_root, counter, test_id))
        finally:
            teardown = getattr(instance, "teardown_method", None)
            if teardown is not None:
                teardown(function)
    except _BaseException as exc:
        return _classify(exc)
    return ("passed", "") if result is None else ("error", "a test method returned a value instead of None")


def _run_case(cls, function, name, class_state):
    state = class_state.get(cls)
    if state is None:
        if getattr(cls, "__unittest_skip__", False):
            state = "skipped: " + str(getattr(cls, "__unittest_skip_why__", ""))
        else:
            try:
                cls.setUpClass()
                state = "ok"
            except _BaseException as exc:
                state = "setUpClass failed: " + _message_of(exc)
        class_state[cls] = state
    if state != "ok":
        return ("skipped" if state.startswith("skipped") else "error"), state
    if getattr(function, "__unittest_skip__", False):
        return "skipped", "skipped: " + str(
            getattr(function, "__unittest_skip_why__", "")
        ) + " (a skipped test does not pass)"
    if getattr(function, "__unittest_expecting_failure__", False):
        return "error", "expectedFailure tests are not supported by Gymwright's runner"
    try:
        case = cls(name)
    except _BaseException as exc:
        return "error", "could not create the test case: " + _message_of(exc)
    outcome, message = "passed", ""
    try:
        case.setUp()
        try:
            result = function(case)
            if result is not None:
                outcome, message = "error", "a test method returned a value instead of None"
        finally:
            case.tearDown()
    except _BaseException as exc:
        outcome, message = _classify(exc)
    try:
        if not case.doCleanups() and outcome == "passed":
            outcome, message = "error", "a cleanup function failed"
    except _BaseException as exc:
        if outcome == "passed":
            outcome, message = "error", "a cleanup function failed: " + _message_of(exc)
    return outcome, message


def _seal(namespace):
    """Run the runner's own code, from now on, on a sealed copy of its globals: `namespace` is the runner's module
    dict, which the tested code can always reach (sys.modules['__main__'], any runner function's __globals__, a
    frame's f_globals) and write, even for a moment (a swapped helper that puts the original back on its first
    call, or a thread that does so before the test ends, passes every check made after the fact). Every function
    and method the runner defined is cloned onto a dict whose item lookups (how a function reads its globals and,
    the runner's names being there too, its builtins) come from a frozen copy, bound as a default argument (a
    tuple: replacing it is an attribute change the audit hook refuses). The clones replace the originals where
    the tests reach them (TestCase's strict methods, the pytest shim). Returns the frozen copy's lookup."""
    store = dict(vars(builtins))
    store.update(namespace)
    frozen = types.MappingProxyType(store)

    class Sealed(dict):
        __slots__ = ()

        def __getitem__(self, key, _frozen=frozen):
            return _frozen[key]

    # Its own items too: what reads the dict directly (a new function's builtins) finds the same.
    sealed = Sealed(store)
    clones = {}

    def ours(value):
        return _isinstance(value, _FunctionType) and value.__globals__ is namespace

    def clone(function):
        if id(function) not in clones:
            copy = _FunctionType(
                function.__code__, sealed, function.__name__, function.__defaults__, function.__closure__
            )
            copy.__kwdefaults__ = function.__kwdefaults__
            copy.__qualname__, copy.__doc__, copy.__module__ = function.__qualname__, function.__doc__, "__main__"
            copy.__dict__.update(function.__dict__)
            clones[id(function)] = (function, copy)
        return clones[id(function)][1]

    def clone_members(holder):
        for attribute, member in list(vars(holder).items()):
            if ours(member):
                setattr(holder, attribute, clone(member))
            elif _type(member) in (staticmethod, classmethod) and ours(member.__func__):
                setattr(holder, attribute, _type(member)(clone(member.__func__)))

    for name, value in list(store.items()):
        if ours(value):
            store[name] = clone(value)
        elif _isinstance(value, type) and value.__module__ == "__main__":
            clone_members(value)
    for name, method in _STRICT.items():
        if _TestCase.__dict__.get(name) is method:
            setattr(_TestCase, name, clone(method))
    shim = sys.modules.get("pytest")
    if _type(shim) is type and shim.__name__ == "pytest" and shim.__module__ == "__main__":
        clone_members(shim)
    store["Sealed"] = Sealed
    return frozen


def _thread_count():
    try:
        return _len(_listdir("/proc/self/task"))
    except OSError:  # no /proc: the check is skipped
        return None


def isolated(function, args):
    """function(*args) in a thread of its own, and its result (a 2-tuple of str). The tested code then runs on a
    stack that holds none of the runner's state (no frame of the main thread is reachable from it: no
    sys._getframe, no sys._current_frames, no gc walks), and no thread of it may outlive the call: the result is
    read only once the main thread is the only one left. Raises Tampered otherwise."""
    box = []
    done = _allocate_lock()
    done.acquire()

    def target():
        try:
            outcome = function(*args)
            # Before the outcome is published: no thread the tested code started may touch it afterwards.
            deadline = _monotonic() + THREAD_EXIT_S
            count = _thread_count()
            while count is not None and count > 2:  # the main thread and this one
                if _monotonic() > deadline:
                    outcome = "tampered", "the tested code left " + str(count - 2) + " thread(s) running"
                    break
                _sleep(0.002)
                count = _thread_count()
            box.append(outcome)
        finally:
            done.release()

    _start_thread(target, ())
    done.acquire()
    deadline = _monotonic() + THREAD_EXIT_S
    while True:
        count = _thread_count()
        if count is None or count <= 1:
            break
        if _monotonic() > deadline:
            raise Tampered("the tested code left " + str(count - 1) + " thread(s) running")
        _sleep(0.002)
    if (
        _len(box) != 1
        or _type(box[0]) is not tuple
        or _len(box[0]) != 2
        or _type(box[0][0]) is not str
        or _type(box[0][1]) is not str
    ):
        raise Tampered("the outcome of a test was written by something other than the runner")
    if box[0][0] == "tampered":
        raise Tampered(box[0][1])
    if _gc_isenabled():
        raise Tampered("the tested code turned the garbage collector back on")
    return box[0]


def load_module(code, module):
    """Run a test module's code (which imports the tested code): ("ok", "") or ("error", why)."""
    try:
        exec(code, module.__dict__)
    except _BaseException as exc:  # SystemExit at import fails this file's tests
        return "error", "importing the test file failed: " + _message_of(exc)
    return "ok", ""


def bound_imports(tree, stdlib):
    """{global name: object it must be} for the test module's top-level imports from the standard library,
    resolved by the runner itself before the module (and the tested code it imports) runs."""
    expected = {}
    for node in tree.body:
        if _isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".", 1)[0]
                if root not in stdlib:
                    continue
                module = importlib.import_module(alias.name)
                expected[alias.asname or root] = module if alias.asname else sys.modules[root]
        elif (
            _isinstance(node, ast.ImportFrom)
            and node.module
            and not node.level
            and node.module.split(".", 1)[0] in stdlib
        ):
            module = importlib.import_module(node.module)
            for alias in node.names:
                if alias.name == "*":
                    continue
                if hasattr(module, alias.name):
                    expected[alias.asname or alias.name] = getattr(module, alias.name)
                else:
                    expected[alias.asname or alias.name] = importlib.import_module(node.module + "." + alias.name)
    return expected


def _finish_classes(class_state):
    for cls, state in list(class_state.items()):
        if state == "ok":
            try:
                cls.tearDownClass()
            except _BaseException:  # the tests' outcomes stand
                pass
    return "ok", ""


def _finisher(results, report):
    """finish(extra): write the one report (the results so far, plus `extra`) and end the run."""

    def finish(extra):
        document = {
            "done": True,
            "results": [
                {"id": test_id, "outcome": outcome, "message": message}
                for test_id, (outcome, message) in results.items()
            ],
        }
        document.update(extra)
        report(document)
        _exit(0)

    return finish


def main():
    config = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    report_fd, nonce = os.open(config["report"], flags, 0o600), config.pop("nonce")
    workspace = config["workspace"]
    modules = config["modules"]
    tests = config["tests"]
    results = {}
    finish = _finisher(results, _make_reporter(report_fd, nonce))  # before any tested code runs

    stdlib_path = [entry for entry in sys.path if entry and not entry.startswith(config["runner_dir"])]
    stdlib = _stdlib_names(config.get("imports", []), stdlib_path)
    cases = frozenset(config.get("cases", []))
    uses_pytest = config["style"] == "pytest" or "pytest" in config.get("imports", [])
    forbidden = {module["name"] for module in modules} | {"unittest"} | stdlib | ({"pytest"} if uses_pytest else set())
    shadows = [
        entry
        for entry in _workspace_shadows(workspace, forbidden)
        if entry not in {module["path"] for module in modules}
    ]
    if shadows:
        finish(
            {
                "refused": "the workspace defines " + ", ".join(sorted(shadows)[:10]) + ", named like a test "
                "module or a standard-library module the tests import; refused (nothing was run)"
            }
        )
    site_dirs = []
    try:
        import site

        site_dirs = [entry for entry in site.getsitepackages() if os.path.isdir(entry)]
    except Exception:  # noqa: BLE001 - no site-packages: the standard library only
        site_dirs = []
    test_dirs = []
    for module in modules:
        folder = os.path.dirname(module["copy"])
        if folder not in test_dirs:
            test_dirs.append(folder)
    sys.path[:] = stdlib_path + test_dirs + [entry for entry in site_dirs if entry not in stdlib_path] + [workspace]
    sys.dont_write_bytecode = True
    if uses_pytest:
        install_pytest(stdlib_path + [entry for entry in site_dirs if entry not in stdlib_path])
        stdlib = stdlib | {"pytest"}
    install_strict_assertions()
    temp_root = os.path.join(config["runner_dir"], "tmp")
    os.makedirs(temp_root, exist_ok=True)
    global _APPROX, _FAILURES, _SKIPS, _ORIGINAL
    _APPROX, _FAILURES, _SKIPS = frozenset(_APPROX), frozenset(_FAILURES), frozenset(_SKIPS)
    _ORIGINAL = types.MappingProxyType(dict(_ORIGINAL))
    # From here on the runner runs its sealed copies only (see _seal), the report writer included.
    sealed = _seal(sys.modules["__main__"].__dict__)
    sealed["freeze_test_case_methods"]()
    finish = sealed["_finisher"](results, sealed["_make_reporter"](report_fd, nonce))
    del nonce
    guard = Guard(sys.modules["__main__"].__dict__, modules)
    guard.watch_namespaces(
        [
            sys.modules.get(name)
            for name in ("unittest", "unittest.case", "pytest", "_pytest.python_api", "_pytest.outcomes")
        ]
    )
    shim = sys.modules.get("pytest")
    # A collection could run the tested code's finalizers on the main thread, whose stack holds the runner's
    # state: objects are freed by reference counting only (a test's cycles live until the run ends).
    _gc_disable()
    sys.addaudithook(sealed["_audit_hook"](guard, (sealed["Sealed"],) + ((shim,) if _type(shim) is type else ())))
    try:
        os.chdir(workspace)
    except OSError:
        pass
    sealed["_run_tests"](config, modules, tests, workspace, results, finish, guard, stdlib, cases, temp_root)


def _run_tests(config, modules, tests, workspace, results, finish, guard, stdlib, cases, temp_root):
    """Load each test module and run its tests (sealed: see _seal); ends the run through `finish`."""
    strict = _Strict
    by_module = {}
    for test_id in tests:
        by_module.setdefault(test_id.split("::", 1)[0], []).append(test_id)
    counter = [0]
    for module_info in modules:
        path = module_info["path"]
        wanted = by_module.get(path, [])
        if not wanted:
            continue
        with open(module_info["copy"], "rb") as handle:
            source = handle.read().decode("utf-8")
        filename = os.path.join(workspace, path)
        try:
            code = rewrite(source, filename)
        except SyntaxError as exc:
            for test_id in wanted:
                results[test_id] = ("error", "the test file does not compile: " + _message_of(exc))
            continue
        codes = frozenset(code_objects(code))
        try:
            expected_imports = bound_imports(ast.parse(source, filename, "exec"), stdlib)
        except Exception as exc:  # noqa: BLE001 - a standard-library import the tests make fails on its own
            for test_id in wanted:
                results[test_id] = ("error", "the test file's imports failed: " + _message_of(exc))
            continue
        guard.remember_modules(stdlib)
        module = types.ModuleType(module_info["name"])
        module.__file__ = filename
        module.__dict__[_HELPER] = strict
        sys.modules[module_info["name"]] = module
        guard.watch_module(module, strict)
        try:
            loaded = isolated(load_module, (code, module))
        except Tampered as exc:
            finish({"tampered": str(exc) + " (importing " + path + ")"})
        if loaded[0] != "ok":
            for test_id in wanted:
                results[test_id] = loaded
            tampered = guard.check()
            if tampered:
                finish({"tampered": tampered})
            continue
        guard.watch_definitions(module, codes, expected_imports)
        tampered = guard.check()
        if tampered:
            finish({"tampered": tampered})
        class_state = {}
        for test_id in wanted:
            try:
                outcome = isolated(
                    run_one,
                    (module, test_id, codes, config["style"], class_state, temp_root, counter, test_id in cases),
                )
            except Tampered as exc:
                outcome, tampered = ("error", "the run was tampered with during this test: " + str(exc)), str(exc)
            else:
                tampered = guard.check()
            results[test_id] = outcome
            if tampered:
                results[test_id] = ("error", "the run was tampered with during this test: " + tampered)
                finish({"tampered": tampered + " (during " + test_id + ")"})
        try:
            isolated(_finish_classes, (class_state,))
        except Tampered as exc:
            finish({"tampered": str(exc)})
        tampered = guard.check()
        if tampered:
            finish({"tampered": tampered})
    finish({})


if __name__ == "__main__":
    main()
