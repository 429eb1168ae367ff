package main

// Adversarial review of the operating commands.
