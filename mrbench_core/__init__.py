"""The bottom package every layer may import: the registry mechanism, JSON-lines reading and
atomic writes, data errors, replay kinds and named seed streams. It imports no other mrbench
package and no torch."""
