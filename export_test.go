package baton

// PauseValue exposes pauseValue to the package's tests.
var PauseValue = pauseValue
