// Package connname names the command connections of a fleet process and
// reads those names back: the identity a driver checks before it severs a
// dropped member's connections (docs/membership.md, "Fencing at the data").
//
// A name is Prefix, the process's incarnation (16 lowercase hex digits,
// NewIncarnation), ':' and the member id with every byte outside '!'..'~',
// and '%' itself, written %XX (uppercase hex). Redis accepts only '!' to
// '~' in a name (CLIENT SETNAME), so every member id gives a valid name;
// two distinct (id, incarnation) pairs never share one; Parse inverts Name
// and refuses any name Name cannot have made.
//
// The root package names every command connection of a fleet process
// with Name before it sends anything else on it; the fleet driver (package
// fleet) lists the servers' connections and keeps those whose Parse result
// is a live member's. The package has no state and needs nothing from its
// callers; its functions are safe for concurrent use.
package connname
