// Package server is runnel's composition root: configuration, lifecycle and
// roles, and the wiring that lets the two front doors, api (HTTP) and
// kafkaproto (Kafka), reach the same partitions and metadata. The HTTP
// door's adapter is package server/httpdoor (httpwire.go wires it), the
// Kafka door's is package server/kafkadoor (its Backend implements
// kafkaproto's interfaces; the server builds it once the broker and the
// coordinators run). The data plane (partitions following the metadata
// image, replication, producer state) is package server/broker.
//
// Transactions, log side (broker/txnmarkers.go): a transaction coordinator
// ends a transaction in a partition with
//
//	func (b *broker.Broker) WriteTxnMarker(ctx context.Context, topic string, partition int32, m recordbatch.Marker) (offset int64, err error)
//
// on the partition's leader (acks=all), or with WriteTxnMarkers (Kafka API
// 27) on the leader's inter-broker port; recordbatch.BuildControl and
// recordbatch.ParseControl are the marker codec. A marker with a newer
// producer epoch fences the old producer; one from an older coordinator
// epoch is refused (broker/producers/table.go). segments.Log tracks the open
// transactions and the aborted-transactions index of every replica, so the
// last stable offset (broker/txnread.go) is right on a new leader too; Kafka
// read_committed Fetch and ListOffsets and HTTP reads with
// isolation=read_committed (the default; broker/data.go, httpdoor/batch.go) stop at it.
//
// The metadata changes both doors make (topics, configs, reassignment,
// leader elections, producer id blocks, the internal topics) are package
// server/admin; the metrics are server/metrics, the client-facing
// certificate server/tlsreload.
//
// The security surface (ACLs over the one authorizer, users, API tokens, UI
// sessions, the HTTP audit log) is package server/access, reached by the
// HTTP door through httpdoor/access.go and by the Kafka door through
// kafkadoor/access.go; the --auth flags and their rules stay here (auth.go,
// authmode.go), the Host check's exemptions are httpdoor/hostcheck.go.
//
// The coordinators are packages of their own: server/groups (consumer
// groups; kafkadoor/groups.go / httpdoor/groups.go translate its errors
// for each door) and server/txn (transactions); server/coordinators gives
// both the broker (groups.Backend; txn's StateLog, MarkerWriter and
// Cluster). The inter-node port is package
// internode, opened by raftfsm/quorum; the server registers 'K'
// (inter-broker Kafka, muxlistener.go) and 'H' (forwarded HTTP, served by
// interHTTP; the HTTP door's httpdoor/forward.go sends them) on it.
//
// Goroutines, all owned by the Server and stopped by Close (in this order):
//   - the HTTP server on each HTTP listener and on interHTTP (forwarded
//     requests), stopped by stopHTTP (graceful, then request contexts end,
//     and with them a request's body read and, a grace later, its answer's
//     write: httpwait.go); while it waits past the grace, stopHTTP's one
//     reporter goroutine logs each second what is in flight (it ends when
//     Shutdown returns, and stopHTTP waits for it);
//     the HTTP door (server/httpdoor) runs on its goroutines and starts
//     none of its own beyond a request's (ListTransactions's per-broker
//     asks, waited for before the request returns);
//   - admin.RunElections on a controller (stopElections; server/admin);
//   - the Kafka listener's doors (client, TLS, inter-broker peers), through
//     serveKafka, stopped by kafka.Close after interBroker closes;
//   - handoffs: one goroutine per inter-node connection being passed from the
//     port mux to interBroker (reading its hello) or interHTTP; Close closes
//     the connections they still hold and waits (muxlistener.go);
//   - the transaction and group coordinators' own goroutines, with the
//     transaction coordinator's leadership follower (server/coordinators;
//     txn.Close, groups.Close: loads and appends in flight end);
//   - the HTTP door forwarder's pooled connections to other nodes (two
//     net/http goroutines each), closed by forward.Close once nothing
//     forwards;
//   - the broker's (storage, fetchers, ISR changes, maintenance; see
//     package server/broker), broker.Close;
//   - the metadata node's (raft, heartbeats, the port mux), meta.Close;
//   - the client certificate's watcher (server/tlsreload), tls.Close.
//
// Open starts them in about the reverse order (the HTTP servers early, so
// /livez answers at once); when it fails half-way, the listeners no server
// took yet are closed before Close runs.
//
// Lock order: the broker's locks (server/broker's doc) and the leaf locks of
// server/access, server/admin, server/kafkadoor, server/metrics,
// server/quota and server/tlsreload are taken inside those packages only;
// the Kafka door, like the HTTP door, holds none while it calls another
// package; the HTTP door holds no
// lock while it calls them or forwards a request (server/httpdoor's doc);
// handoffs.mu is a leaf. No server lock is held while calling a
// coordinator, and the group coordinator holds none of its locks while it
// calls back (groups.Backend).
//
// Idempotent HTTP produce (Idempotency-Key) lives in broker/producers/keys.go: the key
// travels in the producer fields of the batches a request writes, so it is
// replicated and survives failover with the log; partition leaders index it.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/api/rest"
	"github.com/runnel/runnel/internal/warnlimit"
	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/raftfsm/quorum"
	"github.com/runnel/runnel/server/access"
	"github.com/runnel/runnel/server/admin"
	"github.com/runnel/runnel/server/broker"
	"github.com/runnel/runnel/server/coordinators"
	"github.com/runnel/runnel/server/groups"
	"github.com/runnel/runnel/server/httpdoor"
	"github.com/runnel/runnel/server/kafkadoor"
	"github.com/runnel/runnel/server/metrics"
	"github.com/runnel/runnel/server/quota"
	"github.com/runnel/runnel/server/tlsreload"
	"github.com/runnel/runnel/server/txn"
	"github.com/runnel/runnel/web"
)

// Server is one runnel process.
type Server struct {
	cfg    Config
	logger *slog.Logger
	lock   *os.File // flock on the data dir

	meta   *quorum.Node
	admin  *admin.Admin // the metadata changes of both doors, elections
	broker *broker.Broker
	// storage is what the broker's storage loop last saw; made before the
	// broker, so /readyz, metrics and heartbeats read it without s.broker.
	storage *broker.StorageHealth
	metrics *metrics.Metrics
	ready   atomic.Bool

	httpSrv        *http.Server
	tls            *tlsreload.Reloader // nil without --tls-cert-file
	cancelRequests context.CancelFunc  // ends the contexts of HTTP requests
	httpWaits      httpWaits           // the HTTP requests and connections a stop waits for
	forward        *httpdoor.Forwarder // forwarded HTTP, the door's (also the group coordinator's reads)
	// interBroker receives inter-broker Kafka connections from the raft port.
	interBroker *connListener
	interHTTP   *connListener      // forwarded HTTP requests from other nodes
	handoffs    *handoffs          // goroutines passing inter-node connections on
	peerRefused *warnlimit.Limiter // inter-broker connections with a bad hello

	stopElections context.CancelFunc  // stops runLeaderElections
	groups        *groups.Coordinator // nil unless a broker
	txn           *coordinators.Txn   // transaction coordinator; nil unless a broker (server/coordinators)
	kafka         *kafkaproto.Server
	access        *access.Access // ACLs, users, tokens, UI sessions, audit (package server/access)
	quotas        *quota.Node    // client quotas and their meters (package server/quota)
	faults        *testFaults    // test-only clock offset and fsync delay; nil: off
	wg            sync.WaitGroup
}

// Run serves until ctx is done, then shuts down gracefully. It returns an
// error, so the process exits non-zero, when the metadata log or its state
// store can no longer be written (quorum.Node.Failed): the node fail-stops for its supervisor
// to restart it instead of running on with its metadata frozen.
func Run(ctx context.Context, cfg Config) error {
	s, err := Open(cfg)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		s.logger.Info("shutting down")
		return s.Close()
	case <-s.meta.Failed():
		s.logger.Error("shutting down: the metadata log or state cannot be written", "err", s.meta.Failure())
		return errors.Join(fmt.Errorf("metadata log: %w", s.meta.Failure()), s.Close())
	}
}

// Open starts a node: listeners first (so /livez answers at once), then the
// metadata quorum, then the broker. It returns once the node is ready.
func Open(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	start := time.Now()
	s := &Server{cfg: cfg, logger: cfg.Logger}
	if err := cfg.Auth.check(); err != nil {
		return nil, err
	}
	if err := cfg.CheckAuthMode(); err != nil {
		return nil, err
	}
	if err := s.lockDataDir(); err != nil {
		return nil, err
	}
	s.faults = newTestFaults(cfg.TestFaults, cfg.DataDir)
	s.access = s.newAccess()
	if err := s.open(); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.startAuth(); err != nil {
		s.Close()
		return nil, err
	}
	s.ready.Store(true)
	s.logger.Info("runnel ready", s.readyAttrs(time.Since(start))...)
	return s, nil
}

// readyAttrs are the ready line's fields: where to point a browser, curl
// and Kafka clients (the advertised addresses, as URLs where they are).
func (s *Server) readyAttrs(startup time.Duration) []any {
	httpURL := "http://" + advertised(s.cfg.HTTPAdvertisedAddr, s.cfg.HTTPAddr)
	if s.cfg.HTTPAddr == "" {
		httpURL = "https://" + advertised("", s.cfg.HTTPSAddr)
	}
	attrs := []any{"node_id", s.cfg.NodeID, "ui", httpURL + "/ui/", "api", httpURL}
	if s.cfg.HTTPAddr != "" && s.cfg.HTTPSAddr != "" {
		attrs = append(attrs, "https", "https://"+advertised("", s.cfg.HTTPSAddr))
	}
	if s.cfg.KafkaTLSAddr != "" && s.cfg.HasRole(RoleBroker) {
		attrs = append(attrs, "kafka_tls", advertised(s.cfg.KafkaTLSAdvertisedAddr, s.cfg.KafkaTLSAddr))
	}
	if s.cfg.KafkaAddr != "" && s.cfg.HasRole(RoleBroker) {
		attrs = append(attrs, "kafka", advertised(s.cfg.KafkaAdvertisedAddr, s.cfg.KafkaAddr))
	}
	return append(attrs, "data_dir", s.cfg.DataDir, "startup", startup.Round(time.Millisecond))
}

func (s *Server) lockDataDir() error {
	if err := os.MkdirAll(s.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(s.cfg.DataDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("open data dir lock: %w", err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return fmt.Errorf("data dir %s is in use by another runnel process: %w", s.cfg.DataDir, err)
	}
	s.lock = f
	return nil
}

func (s *Server) open() (err error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	if err := s.openTLS(); err != nil {
		return err
	}
	httpLn, httpsLn, err := s.listenHTTP()
	if err != nil {
		return err
	}
	// Listeners no server serves yet are closed when open fails; a server
	// serving one closes it itself (Close).
	unserved := []net.Listener{httpLn, httpsLn}
	defer func() {
		if err != nil {
			closeListeners(unserved...)
		}
	}()
	served := func(ln net.Listener) {
		unserved = slices.DeleteFunc(unserved, func(l net.Listener) bool { return l == ln })
	}
	var kafkaLn, kafkaTLSLn net.Listener
	if s.cfg.KafkaAddr != "" {
		if kafkaLn, err = net.Listen("tcp", s.cfg.KafkaAddr); err != nil {
			return fmt.Errorf("listen Kafka on %s: %w", s.cfg.KafkaAddr, err)
		}
		unserved = append(unserved, kafkaLn)
	}
	if s.cfg.KafkaTLSAddr != "" {
		if s.tls == nil {
			return errors.New("--kafka-tls-addr needs --tls-cert-file and --tls-key-file")
		}
		if kafkaTLSLn, err = net.Listen("tcp", s.cfg.KafkaTLSAddr); err != nil {
			return fmt.Errorf("listen Kafka SSL on %s: %w", s.cfg.KafkaTLSAddr, err)
		}
		kafkaTLSLn = tls.NewListener(kafkaTLSLn, s.tls.ServerConfig())
		unserved = append(unserved, kafkaTLSLn)
	}
	// Inter-broker Kafka (replication) shares the raft port.
	s.interBroker = newConnListener(&net.TCPAddr{})
	s.interHTTP = newConnListener(&net.TCPAddr{})
	s.handoffs = newHandoffs()
	s.peerRefused = warnlimit.New(s.logger, 10*time.Second)
	s.storage = &broker.StorageHealth{}
	s.meta, err = quorum.Open(quorum.Config{
		NodeID:            s.cfg.NodeID,
		Dir:               filepath.Join(s.cfg.DataDir, "meta"),
		BindAddr:          s.cfg.RaftAddr,
		AdvertiseAddr:     s.raftAdvertised(),
		Voters:            s.cfg.Controllers,
		Voter:             s.cfg.HasRole(RoleController),
		Logger:            s.logger.With("component", "raft"),
		HeartbeatInterval: s.cfg.BrokerHeartbeatInterval,
		SessionTimeout:    s.cfg.BrokerSessionTimeout,
		ElectionTimeout:   s.cfg.ControllerElectionTimeout,
		// 0 (the default) unless a test makes them small.
		RaftLogSegmentBytes: s.cfg.TestFaults.RaftLogSegmentBytes,
		ClusterSecret:       s.cfg.ClusterSecret,
		Limits:              s.cfg.TopicLimits,
		PeerTLS:             s.cfg.PeerTLS,
		AllowInsecurePeers:  s.cfg.InsecureInterNode,
		ExtraProtocols: map[byte]func(net.Conn){
			protoKafka: func(c net.Conn) { s.handoffs.run(c, s.acceptPeer) },
			protoHTTP:  func(c net.Conn) { s.handoffs.run(c, s.interHTTP.hand) },
		},
		BrokerHealth: func() string { return errText(s.storage.Err()) },
	})
	if err != nil {
		return fmt.Errorf("open metadata quorum: %w", err)
	}
	s.metrics = metrics.New(reg, metrics.Node{ID: s.cfg.NodeID, Meta: s.meta,
		Partitions: func() int {
			if s.broker == nil {
				return 0
			}
			return s.broker.HostedCount()
		},
		StorageFailed: func() int { return s.storage.Count() },
	})
	s.admin = admin.New(admin.Config{Meta: s.meta, Limits: s.cfg.TopicLimits,
		PropagationTimeout: s.cfg.MetadataPropagationTimeout, Logger: s.logger,
		Reconcile: func(img *raftfsm.Image) error {
			if s.broker == nil {
				return nil
			}
			return s.broker.Reconcile(img)
		},
		TopicDeleted: s.metrics.Forget,
	})
	s.quotas = quota.NewNode(func() *raftfsm.Image { img, _ := s.meta.Image(); return img }, s.admin.Apply)

	door := s.newHTTPDoor()
	s.forward = door.Forwarder()
	handler, err := rest.NewHandler(door, rest.Options{
		Logger:       s.logger.With("component", "http"),
		Registerer:   reg,
		UI:           web.Handler(),
		MaxBodyBytes: s.cfg.MaxBodyBytes,
		Limits:       s.cfg.HTTPLimits,
		ClientAddr:   httpdoor.ClientAddr,
	})
	if err != nil {
		return fmt.Errorf("build HTTP API: %w", err)
	}
	if s.cfg.Pprof {
		handler = withPprof(handler)
	}
	reqCtx, cancelRequests := context.WithCancel(context.Background())
	s.cancelRequests = cancelRequests
	allowed := httpdoor.AllowedHosts(s.cfg.HTTPAllowedHosts, advertised(s.cfg.HTTPAdvertisedAddr, s.cfg.HTTPAddr))
	hostCheck := api.HostCheck(allowed, httpdoor.HostCheckExempt, s.logger.With("component", "http"))
	forwarded := func(r *http.Request) bool { return httpdoor.IsForwarded(r.Context()) }
	s.httpSrv = &http.Server{BaseContext: httpdoor.BaseContext(reqCtx, s.interHTTP),
		Handler:           s.httpWaits.wrap(hostCheck(httpdoor.MarkForwarded(door.WithAuth(s.quotas.HTTP(door.GroupsProxy(handler), forwarded))))),
		ConnState:         s.httpWaits.connState,
		ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	// HTTP/2 on every port: negotiated by ALPN over TLS, and with prior
	// knowledge (h2c) on the plaintext port, so one connection carries
	// many concurrent produces and consumes (curl --http2-prior-knowledge).
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	protocols.SetUnencryptedHTTP2(true)
	s.httpSrv.Protocols = &protocols
	conns := rest.NewConnLimiter(s.cfg.HTTPLimits, s.logger.With("component", "http"))
	conns.Admit = s.connRateAdmit("http", s.cfg.HTTPMaxConnectionRatePerIP)
	if httpLn != nil {
		served(httpLn)
		httpLn = conns.Listener(httpLn, true)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.httpSrv.Serve(httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.logger.Error("HTTP server stopped", "err", err)
			}
		}()
	}
	if httpsLn != nil {
		served(httpsLn)
		httpsLn = conns.Listener(httpsLn, false)
		s.httpSrv.TLSConfig = s.tls.ServerConfig("h2", "http/1.1")
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.httpSrv.ServeTLS(httpsLn, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.logger.Error("HTTPS server stopped", "err", err)
			}
		}()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.httpSrv.Serve(s.interHTTP); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("inter-node HTTP stopped", "err", err)
		}
	}()

	ctx, stop := s.startContext()
	defer stop()
	if err := s.meta.WaitReady(ctx); err != nil {
		return startError(ctx, fmt.Errorf("wait for the metadata quorum: %w", err))
	}
	if s.cfg.HasRole(RoleController) && s.cfg.LeaderRebalanceInterval > 0 {
		ectx, stop := context.WithCancel(context.Background())
		s.stopElections = stop
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.admin.RunElections(ectx, s.cfg.LeaderRebalanceInterval)
		}()
	}
	if s.cfg.HasRole(RoleBroker) {
		if err := s.startBroker(ctx); err != nil {
			return startError(ctx, err)
		}
		cc := coordinators.Config{NodeID: s.cfg.NodeID, Meta: s.meta, Broker: s.broker, Admin: s.admin, Metrics: s.metrics,
			ReadRemote: func(ctx context.Context, leader int32, req api.ConsumeRequest) (api.ConsumeResult, error) {
				// One forwarding hop started here, even when this request
				// was itself forwarded: the coordinator's read is its own.
				return s.forward.Consume(ctx, httpdoor.NodeHost(leader), req)
			},
			HTTPError: httpdoor.HTTPError, DialBroker: s.dialBroker, Now: s.faults.now, Logger: s.logger}
		s.groups = coordinators.NewGroups(cc, groups.Config{NodeID: s.cfg.NodeID, OffsetsPartitions: s.cfg.OffsetsTopicPartitions,
			MinSessionTimeout: s.cfg.GroupMinSessionTimeout, MaxSessionTimeout: s.cfg.GroupMaxSessionTimeout,
			Logger: s.logger.With("component", "groups"), Now: s.faults.now})
		s.groups.Start()
		s.txn = coordinators.StartTxn(cc, txn.Config{Now: s.faults.now, MaxTimeout: s.cfg.TransactionMaxTimeout,
			IDExpiration: s.cfg.TransactionalIDExpiration, Logger: s.logger.With("component", "transactions")},
			s.cfg.TransactionStatePartitions, s.groups)
		door := kafkadoor.New(kafkadoor.Config{NodeID: s.cfg.NodeID, Meta: s.meta, Broker: s.broker, Storage: s.storage,
			Admin: s.admin, Access: s.access, Groups: s.groups, Txn: s.txn, Quotas: s.quotas, Metrics: s.metrics,
			BrokerConfigs: brokerConfigs(&s.cfg), LogLevel: s.cfg.LogLevel, Logger: s.logger})
		s.kafka = kafkaproto.NewServer(door, kafkaproto.Options{
			Logger:              s.logger.With("component", "kafka"),
			MaxRequestSize:      int32(min(s.cfg.MaxBodyBytes, 1<<30)),
			AutoCreateTopics:    s.cfg.KafkaAutoCreateTopics,
			MaxConnections:      s.cfg.KafkaMaxConnections,
			MaxConnectionsPerIP: s.cfg.KafkaMaxConnectionsPerIP,
			AdmitClient:         s.connRateAdmit("kafka", s.cfg.KafkaMaxConnectionRatePerIP),
			MaxPeerConnections:  s.cfg.InterBrokerMaxConnections,
			MaxAdminTopics:      s.cfg.MaxTopicsPerRequest,
			RequireAuth:         s.cfg.Auth.Mode == AuthRequired,
			MaxReauth:           s.cfg.Auth.MaxReauth,
			// A follower fetches all it follows from a leader in one
			// session: at most what a broker hosts.
			MaxReplicaSessionPartitions: int(s.cfg.TopicLimits.MaxBrokerPartitions),
		})
		s.serveKafka(s.interBroker, s.kafka.ServePeers)
		if kafkaLn != nil {
			served(kafkaLn)
			s.serveKafka(kafkaLn, s.kafka.Serve)
		}
		if kafkaTLSLn != nil {
			served(kafkaTLSLn)
			s.serveKafka(kafkaTLSLn, s.kafka.Serve)
		}
	} else {
		closeListeners(kafkaLn, kafkaTLSLn)
	}
	return nil
}
