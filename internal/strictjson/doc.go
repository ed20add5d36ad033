// Package strictjson holds what a strict reader of a hand-written JSON
// file needs beyond encoding/json: refusing a field given twice (which
// encoding/json resolves silently, keeping the last), refusing absurd
// nesting before decoding, and errors that say where, as a person reading
// the file counts (line and column, a field's path as the file spells it).
// The root's LoadConfig is its one user: it decodes with
// json.Decoder.DisallowUnknownFields and words the errors that are about
// its own format; everything here knows nothing of that format.
//
// Contract: every check reads the data once and in time linear in its
// size, whatever its depth; a syntax error is left to the decoder, which
// words it (the checks accept what they cannot parse). Messages are meant
// to be read by the file's author and are part of the behaviour LoadConfig
// documents.
//
// Concurrency: the functions hold no state and are safe for concurrent
// use; a Durations is used by one goroutine.
//
// It needs nothing from the root.
package strictjson
