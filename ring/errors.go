package ring

import "errors"

// Errors returned by New and Ring.With. Each is returned wrapped with the
// offending node or value; match them with errors.Is.
var (
	// ErrNoNodes means the node list was nil or empty.
	ErrNoNodes = errors.New("ring: no nodes")
	// ErrEmptyName means a node had an empty Name.
	ErrEmptyName = errors.New("ring: empty node name")
	// ErrDuplicateName means two nodes had the same Name.
	ErrDuplicateName = errors.New("ring: duplicate node name")
	// ErrInvalidWeight means a node's Weight was negative, NaN or infinite.
	ErrInvalidWeight = errors.New("ring: weight must be finite and >= 0")
	// ErrInvalidVnodes means Config.VnodesPerWeight was negative.
	ErrInvalidVnodes = errors.New("ring: VnodesPerWeight must be >= 0")
	// ErrInvalidRecipe means Config.Recipe was neither 0, Recipe1 nor
	// Recipe2.
	ErrInvalidRecipe = errors.New("ring: unknown placement recipe")
	// ErrTooManyPoints means the nodes' weights times VnodesPerWeight add up
	// to more than MaxPoints points on the circle.
	ErrTooManyPoints = errors.New("ring: too many points")
)
