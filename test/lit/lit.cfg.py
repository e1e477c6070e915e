# lit configuration for Loom: models in ONNX text syntax carry their own
# RUN/CHECK lines as '#' comments.
import os
import lit.formats

config.name = "Loom"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".onnxtxt", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.loom_obj_root, "test", "lit")

config.environment["PATH"] = os.pathsep.join(
    [config.loom_tools_dir,
     os.path.join(config.loom_obj_root, "tools", "loom-calibrate"),
     config.llvm_tools_dir,
     config.environment.get("PATH", os.environ.get("PATH", ""))])
config.substitutions.append(("%loom_src", config.loom_src_root))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(
    ("%loom_run", os.path.join(config.loom_obj_root, "tools", "loom-run",
                               "loom-run")))
# A small shipped cluster for tests that do not care about hardware.
config.substitutions.append(
    ("%hw", os.path.join(config.loom_src_root, "examples", "hw",
                         "atlas800t-a2.yaml")))
config.substitutions.append(
    ("%atlas900", os.path.join(config.loom_src_root, "examples", "hw",
                               "atlas900.yaml")))
# ASan builds (.ci/sanitize): tests that cap memory cannot run there.
if "address" in getattr(config, "loom_sanitize", ""):
    config.available_features.add("asan")
