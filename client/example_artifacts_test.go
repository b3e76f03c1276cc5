package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/baton-dev/baton/client"
)

// Upload content as a new version of an artifact, point a ref at it, and
// download it again.
func ExampleClient_UploadArtifact() {
	ctx := context.Background()
	c, err := client.New(client.Config{Endpoints: strings.Split(os.Getenv("BATON_ENDPOINTS"), ","), Token: os.Getenv("BATON_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	m, err := c.UploadArtifact(ctx, "acme", "findings", strings.NewReader("# Findings\nRaft is fine.\n"),
		client.UploadOptions{MediaType: "text/markdown"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Name, "version", m.Version, m.Size, "bytes")

	var buf bytes.Buffer
	if _, err := c.DownloadArtifact(ctx, "acme", "findings", m.Version, &buf); err != nil {
		log.Fatal(err)
	}
	fmt.Print(buf.String())
	// Output:
	// findings version 1 25 bytes
	// # Findings
	// Raft is fine.
}

// Move a ref by compare-and-set: first only if it does not exist yet, then
// only if it still points at the version the caller read.
func ExampleClient_SetRef() {
	ctx := context.Background()
	c, err := client.New(client.Config{Endpoints: strings.Split(os.Getenv("BATON_ENDPOINTS"), ","), Token: os.Getenv("BATON_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	v1, err := c.UploadArtifact(ctx, "acme", "draft", strings.NewReader("first draft"), client.UploadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	v2, err := c.UploadArtifact(ctx, "acme", "draft", strings.NewReader("second draft"), client.UploadOptions{})
	if err != nil {
		log.Fatal(err)
	}

	r, err := c.SetRef(ctx, "acme", "draft/approved", client.SetRefRequest{ArtifactID: v1.ArtifactID, ExpectAbsent: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("approved version", r.Version)

	_, err = c.SetRef(ctx, "acme", "draft/approved", client.SetRefRequest{ArtifactID: v2.ArtifactID, ExpectAbsent: true})
	fmt.Println("exists already:", errors.Is(err, client.ErrVersionMismatch))

	r, err = c.SetRef(ctx, "acme", "draft/approved", client.SetRefRequest{ArtifactID: v2.ArtifactID, Expect: v1.ArtifactID})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("approved version", r.Version)
	// Output:
	// approved version 1
	// exists already: true
	// approved version 2
}
