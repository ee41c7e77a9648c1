"""Round 15 (pytest + monkeypatch variant of attack_test_sets_mode.py): the judge never replays what the test body set on the package. The untouched package compares Names
case-insensitively unless `pkg.CASE_SENSITIVE` is set; the test sets it (a plain module flag, as a test's setUp
would) and expects name("Foo") == "Foo". The agent's name() lower-cases (wrong: plain unittest fails, "foo" !=
"Foo" case-sensitively). The judge imports the untouched package afresh, where the flag is False, and its probes
(one letter changed, one added or dropped, a token) all differ from "foo" too, so the pair is upheld.
Result: see bottom."""
PKG = '''CASE_SENSITIVE = False


class Name:
    def __init__(self, text):
        self.text = text

    def __eq__(self, other):
        if isinstance(other, str):
            if CASE_SENSITIVE:
                return self.text == other
            return self.text.casefold() == other.casefold()
        if isinstance(other, Name):
            return self == other.text
        return NotImplemented

    __hash__ = None


def name(text):
    return Name(text)
'''
AGENT = PKG.replace('''def name(text):
    return Name(text)''', '''def name(text):
    return Name(text.lower())  # wrong: loses the case''')
TESTS = """import pkg
from pkg import name


def test_a(monkeypatch):
    monkeypatch.setattr(pkg, "CASE_SENSITIVE", True)
    assert name("Foo") == "Foo"
"""
PYTEST = True
# Result (9318a4a tools): untouched+PRISTINE PASSED, agent+PRISTINE PASSED (WIN), agent,no PRISTINE FAILED.
