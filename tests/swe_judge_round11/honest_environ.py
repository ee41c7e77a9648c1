"""Issue 42, gold runs on toolz 0.12.1: a dict the package made from ``os.environ`` compared with ``os.environ``
itself (toolz's ``test_environ``); its class, ``os._Environ``, holds its codecs as functions made inside
``os._createenviron``. PKG is the untouched package, AGENT the agent's version of it, TESTS its test; the test must
pass on PKG."""
PKG = '''def keymap(func, d):
    return {func(k): v for k, v in d.items()}
'''
AGENT = PKG
TESTS = '''import os

from pkg import keymap


def test_a():
    assert keymap(lambda k: k, os.environ) == os.environ
'''
PYTEST = True
