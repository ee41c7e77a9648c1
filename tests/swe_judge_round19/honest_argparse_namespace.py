"""Round 19 (gold runs on semver): two argparse.Namespace objects with equal attributes, as a command-line parser
returns them; semver's test_should_parse_cli_arguments failed on gold (cause E of the scale set's analysis)."""
PKG = 'import argparse\n\ndef parse(argv):\n    parser = argparse.ArgumentParser()\n    parser.add_argument("bump")\n    parser.add_argument("version")\n    return parser.parse_args(argv)\n'
TESTS = 'import argparse\nfrom pkg import parse\n\ndef test_a():\n    assert parse(["major", "1.2.3"]) == argparse.Namespace(bump="major", version="1.2.3")\n'
PYTEST = True
