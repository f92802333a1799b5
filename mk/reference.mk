# train_gpt.py, the PyTorch reference (owner: reference).
#   make test-reference          self-test of train_gpt.py (dev/test_reference.py), ~10 s
#   make references [REF_DIR=d]  reference states for the C tests: $(REF_DIR)/<config>/{model.bin,reference.bin}
REF_DIR ?= build/references

TEST_TARGETS += test-reference

test-reference:
	$(PYTHON) dev/test_reference.py

references:
	PYTHON=$(PYTHON) bash dev/gen_references.sh $(REF_DIR)

.PHONY: test-reference references
