package conduit

import (
	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/api"
)

// logGRPCAddress says where api.grpc.address listens, when it is set.
func logGRPCAddress(log *zap.Logger, s *api.Server) {
	if a := s.GRPCAddr(); a != "" {
		log.Info("API listening for Conduit's clients (api.grpc.address)", zap.String("address", a))
	}
}
