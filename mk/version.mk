# The git revision a binary was built from (llmc/progress.h prints it in the run header).
#   GIT_REVISION     `git describe --always --dirty`, "unknown" outside a git checkout
#   VERSION_DEFINE   -DGIT_REVISION="..." for a trainer's compile line
# build/git_revision holds the revision and changes only when it does, so a trainer that depends on
# it is rebuilt after a commit or once the tree becomes dirty. (--no-optional-locks: never take the
# index lock, which a concurrent `git commit` needs.)
GIT_REVISION := $(shell git --no-optional-locks describe --always --dirty 2>/dev/null || echo unknown)
VERSION_DEFINE := -DGIT_REVISION='"$(GIT_REVISION)"'
$(shell mkdir -p build && { [ "$$(cat build/git_revision 2>/dev/null)" = "$(GIT_REVISION)" ] || echo "$(GIT_REVISION)" >build/git_revision; })

train_gpt_cpu: CFLAGS += $(VERSION_DEFINE)
train_gpt_cpu: build/git_revision
