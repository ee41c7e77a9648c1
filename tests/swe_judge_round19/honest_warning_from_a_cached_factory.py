"""Round 19 (the scale set's gold analysis, cause G: python-dateutil's test_tzstr_internal_timedeltas): the
package warns when it builds a zone and caches the zone, so a canary that copied the test's body left the test
nothing to warn about (it failed in two draws of three); a test that asserts a warning gets plain canaries."""
PKG = 'import warnings\n\n_CACHE = {}\n\n\nclass Zone:\n    def __init__(self, text):\n        warnings.warn("the GNU form is deprecated", DeprecationWarning)\n        self.text = text\n\n\ndef zone(text):\n    if text not in _CACHE:\n        _CACHE[text] = Zone(text)\n    return _CACHE[text]\n'
TESTS = 'import pytest\nfrom pkg import zone\n\n\ndef test_a():\n    with pytest.warns(DeprecationWarning):\n        assert zone("EST5EDT").text == "EST5EDT"\n'
PYTEST = True
