# `sam build` runs these targets (BuildMethod: makefile) with ARTIFACTS_DIR set.
# Wheels are fetched for the Lambda platform (manylinux, CPython 3.12), so no Docker is needed, and every module
# is compiled to bytecode with the runtime's Python: Lambda's code directory is read-only, so a package without
# .pyc files recompiles every imported module on every cold start.
#
#   sam build                                                 # the template's default Architecture (x86_64)
#   sam build --parameter-overrides Architecture=arm64        # or parameter_overrides in samconfig.toml
#
# SAM does not tell a Makefile the function's architecture: scripts/lambda_arch.py reads it from the `sam build`
# that started make (its --parameter-overrides, else its samconfig.toml, else the template's Default), so the
# wheels always match the deployed Architecture. LAMBDA_ARCH, if set, must agree or the build fails.

LAMBDA_PYTHON_VERSION ?= 3.12
# requirements-lambda-triton.txt adds the gRPC client for models forwarded to Triton.
LAMBDA_REQUIREMENTS ?= requirements-lambda.txt
# The first python3.12 that runs: on PATH, else one installed by pyenv.
LAMBDA_PYTHON ?= $(firstword $(shell python$(LAMBDA_PYTHON_VERSION) -c 'import sys; print(sys.executable)' 2>/dev/null) \
	$(wildcard $(or $(PYENV_ROOT),$(HOME)/.pyenv)/versions/$(LAMBDA_PYTHON_VERSION).*/bin/python$(LAMBDA_PYTHON_VERSION)))
ARCH = $(shell LAMBDA_ARCH=$(LAMBDA_ARCH) $(LAMBDA_PYTHON) scripts/lambda_arch.py template.yaml)
MACHINE_x86_64 := x86_64
MACHINE_arm64 := aarch64
SOURCES := handler adapters proto models
COMPILE = $(LAMBDA_PYTHON) -m compileall -q -j 0 --invalidation-mode unchecked-hash

.PHONY: build-DependenciesLayer build-InferenceFunction build-BatchFunction build-PreTrafficHookFunction check-python lock

# --- Locks -----------------------------------------------------------------------------------------------------
# `make lock` (needs uv: pip install uv) compiles, from pyproject.toml:
#   requirements-dev.txt           the test environment: pip install -e '.[dev]' -c requirements-dev.txt
#   requirements-lambda.txt        the Lambda package (default): [project] dependencies + the `lambda` extra
#   requirements-lambda-triton.txt the same with tritonclient[http] for models forwarded to Triton
# The Lambda locks are constrained by the dev lock, so the tests run on the versions that ship (a test checks it),
# hash every file of each pinned version, and are compiled for manylinux_2_28 on x86_64 and on aarch64: the two
# must come out identical (one lock for both architectures) or `make lock` fails.
# Left out of the Lambda package (never imported by handler.http or handler.batch on Lambda):
#   uvicorn and its [standard] extras, click, h11, pyyaml, tqdm   only `oip serve` / `oip batch` use them
#   prometheus-client                            only `oip serve`'s metrics process (Lambda reports through EMF)
#   ml-dtypes                                    BF16 only (25 MB); without it a BF16 request gets a 400 saying so
#   botocore, python-dateutil, six               boto3/botocore come with the Lambda Python runtime
#   colorama                                     Windows only
UV ?= uv
LOCK_PYTHON_VERSION ?= 3.11
NOT_ON_LAMBDA := uvicorn uvloop httptools watchfiles websockets python-dotenv click h11 pyyaml tqdm \
	prometheus-client botocore python-dateutil six colorama
LAMBDA_LOCK = $(UV) pip compile pyproject.toml --quiet --generate-hashes --python-version $(LAMBDA_PYTHON_VERSION) \
	--constraint requirements-dev.txt --custom-compile-command "make lock" --no-strip-markers
# $(call lock_lambda,output,extras,excluded packages)
define lock_lambda
	$(LAMBDA_LOCK) $(2) --python-platform x86_64-manylinux_2_28 $(foreach p,$(3),--no-emit-package $(p)) -o $(1)
	$(LAMBDA_LOCK) $(2) --python-platform aarch64-manylinux_2_28 $(foreach p,$(3),--no-emit-package $(p)) \
		-o $(1).aarch64
	cmp $(1) $(1).aarch64 || { echo "$(1): x86_64 and aarch64 resolve differently" >&2; rm -f $(1).aarch64; exit 1; }
	rm -f $(1).aarch64
endef

lock:
	$(UV) pip compile pyproject.toml --quiet --extra dev --python-version $(LOCK_PYTHON_VERSION) \
		--python-platform x86_64-manylinux_2_28 --custom-compile-command "make lock" -o requirements-dev.txt
	$(call lock_lambda,requirements-lambda.txt,--extra lambda,$(NOT_ON_LAMBDA) ml-dtypes)
	$(call lock_lambda,requirements-lambda-triton.txt,--extra lambda --extra triton-http,$(NOT_ON_LAMBDA))

# --- Lambda build (sam build) ----------------------------------------------------------------------------------

check-python:
	@test -n "$(LAMBDA_PYTHON)" || { echo "python$(LAMBDA_PYTHON_VERSION) is needed on PATH to build for the Lambda runtime" >&2; exit 1; }

# Third-party packages, shared by both functions (mounted at /opt/python): exactly the lock (hashes checked, no
# resolution), as wheels for the architecture the template deploys.
build-DependenciesLayer: check-python
	@machine=$(MACHINE_$(ARCH)); test -n "$$machine" || { echo "no architecture for the build (see above)" >&2; exit 1; }; \
	echo "DependenciesLayer: $(ARCH) wheels ($$machine) from $(LAMBDA_REQUIREMENTS)"; \
	$(LAMBDA_PYTHON) -m pip install --quiet --disable-pip-version-check --no-compile --target "$(ARTIFACTS_DIR)/python" \
		--implementation cp --python-version $(LAMBDA_PYTHON_VERSION) --only-binary=:all: \
		--platform manylinux_2_28_$$machine --platform manylinux2014_$$machine \
		--no-deps --require-hashes -r $(LAMBDA_REQUIREMENTS)
	# Never loaded at inference time, so left out (the package stays under 150 MB; a test serves every event from it):
	# - onnxruntime/capi/libonnxruntime.so* (35 MB): the C API library for native programs; the Python module
	#   (onnxruntime_pybind11_state) links onnxruntime statically and needs only libc/libstdc++ (readelf -d)
	# - onnxruntime's model-conversion tools, numpy's test suites and f2py, console scripts
	cd "$(ARTIFACTS_DIR)/python" && rm -rf bin onnxruntime/transformers onnxruntime/quantization onnxruntime/tools \
		onnxruntime/capi/libonnxruntime.so* numpy/f2py
	find "$(ARTIFACTS_DIR)/python/numpy" -name tests -type d -prune -exec rm -rf {} +
	$(COMPILE) "$(ARTIFACTS_DIR)/python" > /dev/null

# The project's own code and the demo models.
build-InferenceFunction build-BatchFunction build-PreTrafficHookFunction: check-python
	@test -n "$(MACHINE_$(ARCH))" || { echo "no architecture for the build (see above)" >&2; exit 1; }
	cp -R $(SOURCES) "$(ARTIFACTS_DIR)/"
	find "$(ARTIFACTS_DIR)" -name __pycache__ -type d -prune -exec rm -rf {} +
	$(COMPILE) "$(ARTIFACTS_DIR)" > /dev/null
