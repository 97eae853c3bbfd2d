package mcp

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServerAnswersAndRecords(t *testing.T) {
	for _, stream := range []bool{false, true} {
		s := Start(Config{Versions: []string{"2025-03-26", "2025-06-18"}, EventStream: stream})
		c := Client{}
		r, err := c.Initialize(context.Background(), s.URL(), "2025-11-25")
		require.NoError(t, err)
		assert.Equal(t, "2025-06-18", r.ProtocolVersion)
		assert.NotEmpty(t, r.SessionID)
		init, ok := s.LastInitialize()
		require.True(t, ok)
		assert.Equal(t, "2025-11-25", init.Requested)
		assert.Equal(t, "2025-11-25", init.Header)
		s.Close()
	}
	s := Start(Config{Versions: []string{"2025-06-18"}, RefuseUnsupported: true})
	defer s.Close()
	r, err := (&Client{OmitVersionHeader: true}).Initialize(context.Background(), s.URL(), "2024-11-05")
	require.NoError(t, err)
	require.NotNil(t, r.Error)
	assert.Equal(t, -32602, r.Error.Code)
	init, _ := s.LastInitialize()
	assert.Empty(t, init.Header)
}
