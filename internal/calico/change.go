package calico

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Object names an object winready changes.
type Object string

// The objects winready changes.
const (
	ObjectInstallation     Object = "Installation default"
	ObjectIPAMConfig       Object = "IPAMConfiguration default"
	ObjectServicesEndpoint Object = "ConfigMap " + OperatorNamespace + "/" + ServicesEndpointConfigMap
)

// Absent stands for a field or object that does not exist, in plans.
const Absent = "<absent>"

// Value is the value of a field; the zero Value is absent.
type Value struct {
	// Present is false when the field does not exist.
	Present bool
	// V is a string, a bool or a []string.
	V any
	// Opaque marks a structure the Tigera operator fills in: it is not
	// compared by content, and its removal is guarded by the object's
	// resourceVersion instead, so that fields a newer operator adds do not
	// break the guard.
	Opaque bool
}

// Of is a present value.
func Of(v any) Value { return Value{Present: true, V: v} }

// OfString is the value of an optional string field, absent when nil.
func OfString(s *string) Value {
	if s == nil {
		return Value{}
	}
	return Of(*s)
}

// OfList is the value of an optional list field, absent when nil.
func OfList(l []string) Value {
	if l == nil {
		return Value{}
	}
	return Of(slices.Clone(l))
}

// Equal reports whether two values are the same, absence included.
func (v Value) Equal(o Value) bool {
	if v.Present != o.Present {
		return false
	}
	if !v.Present {
		return true
	}
	if a, ok := v.V.([]string); ok {
		b, ok := o.V.([]string)
		return ok && slices.Equal(a, b)
	}
	return v.V == o.V
}

// String renders the value as plans show it.
func (v Value) String() string {
	if !v.Present {
		return Absent
	}
	if v.Opaque {
		return "<set by the Tigera operator>"
	}
	switch t := v.V.(type) {
	case nil:
		return "present"
	case string:
		return t
	case bool:
		return strconv.FormatBool(t)
	case []string:
		return "[" + strings.Join(t, ", ") + "]"
	}
	return fmt.Sprint(v.V)
}

// any is the value as JSON patch operations carry it; nil when absent.
func (v Value) any() any {
	if !v.Present {
		return nil
	}
	return v.V
}

// PoolItem is the Installation pool a pointer's index designates. The index
// is trusted only together with the CIDR found at it.
type PoolItem struct {
	Name string
	CIDR string
}

// Change is one change of one field of one object: the unit of every plan,
// patch, conflict check and YAML to commit.
type Change struct {
	Object Object
	// Pointer is the field's RFC 6901 JSON pointer; "" is the object itself.
	Pointer string
	// Old is the value read, New the value to write.
	Old, New Value
	// Pool is set for a field of an Installation pool.
	Pool *PoolItem
	// Later, when set, says when the change will be made: it is planned and
	// shown, not made now.
	Later string
}

// Field names the changed field as people read it, e.g.
// spec.calicoNetwork.ipPools[name=default-ipv4-ippool].encapsulation.
func (c Change) Field() string {
	if c.Pointer == "" {
		return "(object)"
	}
	parts := Segments(c.Pointer)
	if i := indexSegment(parts); i > 0 && c.Pool != nil {
		parts[i-1] += "[name=" + c.Pool.Name + "]"
		parts = append(parts[:i], parts[i+1:]...)
	}
	return strings.Join(parts, ".")
}

// indexSegment is the position of the first list index in a pointer's
// segments, -1 when there is none.
func indexSegment(parts []string) int {
	for i, part := range parts {
		if _, err := strconv.Atoi(part); err == nil {
			return i
		}
	}
	return -1
}

// Before renders the old value as plans show it.
func (c Change) Before() string { return c.Old.String() }

// After renders the new value as plans show it; a deletion says when it is
// made if it waits.
func (c Change) After() string {
	if c.Pointer != "" || c.New.Present {
		return c.New.String()
	}
	if c.Later != "" {
		return Absent + " (deleted " + c.Later + ")"
	}
	return Absent + " (deleted)"
}

// Due are the changes to make now: those not planned for later.
func Due(changes []Change) []Change {
	var due []Change
	for _, c := range changes {
		if c.Later == "" {
			due = append(due, c)
		}
	}
	return due
}

// FieldChange is the change of one field from old to want; nil when they are
// the same.
func FieldChange(obj Object, pointer string, old, want Value) []Change {
	if old.Equal(want) {
		return nil
	}
	return []Change{{Object: obj, Pointer: pointer, Old: old, New: want}}
}

// Segments splits a JSON pointer into its reference tokens.
func Segments(pointer string) []string {
	if pointer == "" {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	for i, p := range parts {
		parts[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(p)
	}
	return parts
}
