"""The stream processors: pure domain rules, and the Faust app that folds the topics with them."""
