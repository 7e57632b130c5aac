package org.korpus.opensearch;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;

import org.opensearch.analysis.common.CommonAnalysisPlugin;
import org.opensearch.common.logging.LogConfigurator;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.painless.PainlessPlugin;
import org.opensearch.plugins.Plugin;
import org.opensearch.transport.Netty4Plugin;

/**
 * One OpenSearch node in this JVM, with the plugins korpus needs passed as classes: netty4 (HTTP and transport),
 * analysis-common (the {@code russian} analyzer), painless (the plugin k-NN extends) and k-NN (HNSW on the pure-Java
 * {@code lucene} engine). Started by {@code korpus opensearch start} (korpus/apps/cli/opensearch.py), which waits for
 * the cluster's health itself.
 *
 * <p>Arguments: {@code HOME NODE_NAME HTTP_PORT TRANSPORT_PORT SEED_PORTS INITIAL_NODES} where SEED_PORTS is a comma
 * list of the cluster's transport ports (one port: a single-node cluster) and INITIAL_NODES a comma list of node names
 * (the first cluster-manager election). {@code HOME/config/opensearch.yml}, when present, adds settings. The system
 * property {@code korpus.plugins} adds plugin classes by name (comma-separated): the security plugin of a secured
 * node, whose jars the starter puts on the classpath (tasks/runtime/opensearch_node.py).
 *
 * <p>Owned by its starter: standard input is a leash. The line {@code detach} lets the node run on its own; end of
 * input before it (the starter died, or a test session that never detaches ended) stops the node. So no JVM outlives
 * a start that failed or was killed.
 */
public final class KorpusNode extends Node {

    /** The k-NN plugin comes from its unpacked zip on the classpath, so it is named, not imported. */
    static final String KNN_PLUGIN = "org.opensearch.knn.plugin.KNNPlugin";

    private KorpusNode(Environment environment, Collection<Class<? extends Plugin>> plugins) {
        super(environment, plugins, true);
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: KorpusNode HOME NODE_NAME HTTP_PORT TRANSPORT_PORT SEED_PORTS INITIAL_NODES");
            System.exit(2);
        }
        Path home = Paths.get(args[0]).toAbsolutePath();
        String[] seeds = args[4].split(",");
        Files.createDirectories(home.resolve("config"));
        Settings.Builder settings = Settings.builder()
            .put("path.home", home.toString())
            .put("path.data", home.resolve("data").toString())
            .put("path.logs", home.resolve("logs").toString())
            .put("cluster.name", "korpus-local")
            .put("node.name", args[1])
            .put("network.host", "127.0.0.1")
            .put("http.port", args[2])
            .put("transport.port", args[3])
            // a development node on a shared disk: never turn indices read-only because the disk is busy elsewhere
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            .put("indices.breaker.total.use_real_memory", false);
        if (seeds.length == 1) {
            settings.put("discovery.type", "single-node");
        } else {
            List<String> hosts = new ArrayList<>();
            for (String port : seeds) {
                hosts.add("127.0.0.1:" + port);
            }
            settings.putList("discovery.seed_hosts", hosts);
            settings.putList("cluster.initial_cluster_manager_nodes", List.of(args[5].split(",")));
        }
        Path extra = home.resolve("config").resolve("opensearch.yml");
        if (Files.exists(extra)) {
            settings.put(Settings.builder().loadFromPath(extra).build());
        }
        Environment environment = InternalSettingsPreparer.prepareEnvironment(
            settings.build(), Collections.emptyMap(), home.resolve("config"), () -> args[1]);
        LogConfigurator.configureWithoutConfig(environment.settings());

        leash();
        try {
            KorpusNode node = new KorpusNode(environment, plugins());
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                try {
                    node.close();
                } catch (Exception e) {
                    e.printStackTrace();
                }
            }, "korpus-node-close"));
            node.start();
        } catch (Throwable e) {  // the leash thread would keep a JVM whose node never started alive
            System.out.println("korpus-opensearch: " + args[1] + " did not start: " + e);
            e.printStackTrace(System.out);
            System.out.flush();
            Runtime.getRuntime().halt(1);
        }
        System.out.println("korpus-opensearch: " + args[1] + " started, http://127.0.0.1:" + args[2]);
        System.out.flush();
    }

    private static List<Class<? extends Plugin>> plugins() {
        try {
            List<Class<? extends Plugin>> found = new ArrayList<>(List.of(Netty4Plugin.class,
                CommonAnalysisPlugin.class, PainlessPlugin.class, Class.forName(KNN_PLUGIN).asSubclass(Plugin.class)));
            String extra = System.getProperty("korpus.plugins", "");
            for (String name : extra.split(",")) {
                if (!name.isBlank()) {
                    found.add(Class.forName(name.trim()).asSubclass(Plugin.class));
                }
            }
            return found;
        } catch (ClassNotFoundException e) {
            throw new IllegalStateException("the k-NN plugin cannot load (" + KNN_PLUGIN + " is not on the classpath:"
                + " its jars come from the opensearch-knn zip, unpacked into target/knn)", e);
        }
    }

    /** Stop the node when standard input ends before the line "detach"; after it, keep the JVM up (see the class
     * comment). */
    private static void leash() {
        Thread watch = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("detach")) {
                        // the node's own threads are daemons: this one keeps the JVM up until it is stopped
                        new CountDownLatch(1).await();
                    }
                }
            } catch (Exception e) {
                // unreadable input counts as the starter gone
            }
            System.out.println("korpus-opensearch: the starter is gone; stopping");
            System.exit(3);
        }, "korpus-node-leash");
        watch.setDaemon(false);
        watch.start();
    }
}
