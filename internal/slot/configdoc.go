package slot

import (
	"bytes"
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// configDoc is config.yaml as a YAML node tree, edited in place: keys set
// here are appended to (or replace the value of) the top-level mapping;
// every other key, and the operator's comments, stay as written.
type configDoc struct {
	root    *yaml.Node // the document node
	changed bool
}

func newConfigDoc(data []byte) (*configDoc, error) {
	d := &configDoc{root: &yaml.Node{Kind: yaml.DocumentNode}}
	if len(bytes.TrimSpace(data)) > 0 {
		if err := yaml.Unmarshal(data, d.root); err != nil {
			return nil, err
		}
	}
	switch {
	case len(d.root.Content) == 0:
		d.root.Kind = yaml.DocumentNode
		d.root.Content = []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}
	case d.root.Content[0].Kind != yaml.MappingNode:
		// A file of comments only decodes as a null scalar.
		if n := d.root.Content[0]; n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			d.root.Content[0] = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", HeadComment: n.HeadComment, FootComment: n.FootComment}
			break
		}
		return nil, fmt.Errorf("not a mapping of settings")
	}
	return d, nil
}

func (d *configDoc) mapping() *yaml.Node { return d.root.Content[0] }

// has says whether the file sets key (to anything but null).
func (d *configDoc) has(key string) bool {
	m := d.mapping()
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			v := m.Content[i+1]
			return !(v.Kind == yaml.ScalarNode && v.Tag == "!!null")
		}
	}
	return false
}

// scalar returns key's value when it is a scalar.
func (d *configDoc) scalar(key string) (string, bool) {
	m := d.mapping()
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key && m.Content[i+1].Kind == yaml.ScalarNode {
			return m.Content[i+1].Value, true
		}
	}
	return "", false
}

// set sets key to v, replacing its value where the file has the key.
func (d *configDoc) set(key string, v any) error {
	var val yaml.Node
	if err := val.Encode(v); err != nil {
		return fmt.Errorf("config.yaml: %s: %w", key, err)
	}
	m := d.mapping()
	d.changed = true
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			val.LineComment = m.Content[i+1].LineComment
			m.Content[i+1] = &val
			return nil
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, &val)
	return nil
}

// write writes the document to file atomically.
func (d *configDoc) write(file string) error {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(d.root); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	if err := state.WriteFile(file, b.Bytes()); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	return nil
}
