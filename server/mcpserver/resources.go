package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/client"
)

// Resource URIs: a task as JSON, an artifact's content (the latest
// version, or one version).
const (
	taskURI            = "baton://tasks/{task_id}"
	artifactURI        = "baton://artifacts/{name}"
	artifactVersionURI = "baton://artifacts/{name}/versions/{version}"
)

func (s *Session) addResources(srv *mcp.Server) {
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "task", URITemplate: taskURI, MIMEType: "application/json",
		Description: "A task of the tenant, as JSON."}, s.readTaskResource)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "artifact", URITemplate: artifactURI,
		Description: "The latest version of an artifact, as text."}, s.readArtifactResource)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "artifact-version", URITemplate: artifactVersionURI,
		Description: "One version of an artifact, as text."}, s.readArtifactResource)
}

// resourcePath returns the segments of a baton:// URI after its kind.
func resourcePath(uri, kind string) ([]string, bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "baton" || u.Host != kind {
		return nil, false
	}
	var segs []string
	for _, p := range strings.Split(strings.TrimPrefix(u.EscapedPath(), "/"), "/") {
		v, err := url.PathUnescape(p)
		if err != nil || v == "" {
			return nil, false
		}
		segs = append(segs, v)
	}
	return segs, true
}

func (s *Session) readTaskResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	segs, ok := resourcePath(uri, "tasks")
	if !ok || len(segs) != 1 {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	t, err := s.cfg.Client.GetTask(ctx, s.cfg.Tenant, segs[0])
	if errors.Is(err, client.ErrNotFound) {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, s.explain("read "+uri, err)
	}
	b, err := json.Marshal(taskOut(t))
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}

func (s *Session) readArtifactResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	segs, ok := resourcePath(uri, "artifacts")
	var in ReadArtifactIn
	switch {
	case ok && len(segs) == 1:
		in.Name = segs[0]
	case ok && len(segs) == 3 && segs[1] == "versions":
		v, err := strconv.ParseUint(segs[2], 10, 64)
		if err != nil || v == 0 {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		in.Name, in.Version = segs[0], v
	default:
		return nil, mcp.ResourceNotFoundError(uri)
	}
	m, text, err := s.readArtifact(ctx, in)
	if err != nil {
		var e *client.Error
		if errors.As(err, &e) && errors.Is(e, client.ErrNotFound) {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		return nil, err
	}
	mt := m.MediaType
	if mt == "" {
		mt = "text/plain"
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mt, Text: text}}}, nil
}
