import unittest

from configlite import apply_env


class TestApplyEnv(unittest.TestCase):
    def test_section_override(self):
        config = {"default": {}, "server": {"port": "80"}}
        result = apply_env(config, {"APP_SERVER__PORT": "8080"})
        self.assertEqual(result["server"]["port"], "8080")

    def test_default_section(self):
        result = apply_env({"default": {}}, {"APP_NAME": "demo"})
        self.assertEqual(result["default"]["name"], "demo")

    def test_other_variables_are_ignored(self):
        result = apply_env({"default": {}}, {"HOME": "/root", "PATH": "/bin"})
        self.assertEqual(result, {"default": {}})

    def test_original_is_not_modified(self):
        config = {"server": {"port": "80"}}
        apply_env(config, {"APP_SERVER__PORT": "8080"})
        self.assertEqual(config["server"]["port"], "80")


if __name__ == "__main__":
    unittest.main()
