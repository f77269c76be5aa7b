"""The Faust and aiokafka adapter: where the worker corrects or replaces Faust's internals (`patches.install`)."""
