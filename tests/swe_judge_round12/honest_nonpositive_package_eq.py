"""Red team, round 12 (helper-38, against 0b5b50d). False alarm on the untouched package: a comparison of two package objects in a non-positive position of a pytest
assert (`assert (a == b) is True`, `assert a == b or a is None`, `assert bool(a == b)`) runs the package's own `==`
and then `_turngym_strict` *refuses* it (either side's `==` is the repository's) by raising, instead of handing the
pair to the judge as a positive comparison would. Plain pytest passes; the grader fails the untouched code. Fix: for a
non-positive comparison of a refused pair, freeze the pair *before* it runs (an __eq__ may copy the expectation into
its object, round 5), let the comparison run, and when it held, send the frozen pair to the judge as a positive one
would (a dispute can only turn that True into a failure); raise only when no judge can."""
PKG = '''class Version:
    def __init__(self, text):
        self.parts = tuple(int(p) for p in text.split("."))

    def __eq__(self, other):
        return isinstance(other, Version) and self.parts == other.parts

    __hash__ = None


def parse(text):
    return Version(text)
'''
AGENT = PKG
TESTS = '''from pkg import Version, parse


def test_a():
    v = parse("1.2")
    assert (v == Version("1.2")) is True
    assert v == Version("1.2") or v is None
'''
PYTEST = True
