/*
 * Starts a real Solr 9.8 (SolrCloud, one node, embedded ZooKeeper) on 127.0.0.1 from the jars
 * that solr/local/pom.xml fetches, and creates FileShare and VectorMain from solr/configsets,
 * the same configsets docker-compose.yml uploads to the official solr:9.8 image.
 *
 * Run as a single-file source program (no build step):
 *   java -cp 'solr/local/lib/*' solr/local/SolrLauncher.java --port 8983 --dir .solr-data \
 *        --configsets solr/configsets
 *
 * It prints "SOLR READY <base url>" once both collections answer, and stops cleanly on SIGTERM.
 * Data in --dir survives a restart on the same port.
 */
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.stream.Stream;
import org.apache.solr.client.solrj.impl.CloudSolrClient;
import org.apache.solr.client.solrj.request.CollectionAdminRequest;
import org.apache.solr.cloud.MiniSolrCloudCluster;
import org.apache.solr.embedded.JettyConfig;
import org.apache.solr.embedded.JettySolrRunner;

public class SolrLauncher {

  private static final String SOLR_XML =
      """
      <solr>
        <str name="allowPaths">${solr.allowPaths:}</str>
        <str name="sharedLib">${solr.sharedLib:}</str>
        <solrcloud>
          <str name="host">127.0.0.1</str>
          <int name="hostPort">${hostPort:8983}</int>
          <str name="hostContext">${hostContext:solr}</str>
          <int name="zkClientTimeout">30000</int>
          <bool name="genericCoreNodeNames">true</bool>
          <int name="leaderVoteWait">1000</int>
        </solrcloud>
        <shardHandlerFactory name="shardHandlerFactory" class="HttpShardHandlerFactory">
          <int name="socketTimeout">60000</int>
          <int name="connTimeout">5000</int>
        </shardHandlerFactory>
      </solr>
      """;

  record Options(int port, Path dir, Path configsets) {
    static Options parse(String[] args) {
      int port = 8983;
      Path dir = Path.of(".solr-data");
      Path configsets = Path.of("solr/configsets");
      for (int i = 0; i < args.length; i++) {
        String value = i + 1 < args.length ? args[i + 1] : null;
        switch (args[i]) {
          case "--port" -> { port = Integer.parseInt(value); i++; }
          case "--dir" -> { dir = Path.of(value); i++; }
          case "--configsets" -> { configsets = Path.of(value); i++; }
          default -> throw new IllegalArgumentException(
              "unknown option " + args[i] + " (use --port N --dir PATH --configsets PATH)");
        }
      }
      return new Options(port, dir.toAbsolutePath(), configsets.toAbsolutePath());
    }
  }

  public static void main(String[] args) throws Exception {
    Options options = Options.parse(args);
    long started = System.nanoTime();
    List<Path> configsets = listConfigsets(options.configsets());

    JettyConfig jetty = JettyConfig.builder().setPort(options.port()).setContext("/solr").build();
    // The cluster starts ZooKeeper only; the node is started here so that an existing node
    // folder (a restart) is reused instead of refused.
    MiniSolrCloudCluster cluster = new MiniSolrCloudCluster(0, options.dir(), SOLR_XML, jetty);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> stop(cluster), "solr-launcher-stop"));
    Path nodeDir = Files.createDirectories(options.dir().resolve("node1"));
    Properties nodeProperties = new Properties();
    nodeProperties.setProperty("zkHost", cluster.getZkServer().getZkAddress());
    cluster.startJettySolrRunner(new JettySolrRunner(nodeDir.toString(), nodeProperties, jetty));
    cluster.waitForAllNodes(60);

    CloudSolrClient client = cluster.getSolrClient();
    Set<String> existing = Set.copyOf(CollectionAdminRequest.listCollections(client));
    for (Path configset : configsets) {
      String name = configset.getFileName().toString();
      cluster.uploadConfigSet(configset.resolve("conf"), name);
      if (existing.contains(name)) {
        CollectionAdminRequest.reloadCollection(name).process(client);
      } else {
        CollectionAdminRequest.createCollection(name, name, 1, 1).process(client);
      }
      cluster.waitForActiveCollection(name, 1, 1);
    }

    String url = cluster.getJettySolrRunner(0).getBaseUrl().toString();
    long millis = (System.nanoTime() - started) / 1_000_000;
    System.out.println("SOLR READY " + url + " (" + millis + " ms, collections "
        + configsets.stream().map(p -> p.getFileName().toString()).toList() + ")");
    System.out.flush();
    Thread.currentThread().join();
  }

  /** Each sub-folder holding conf/solrconfig.xml is a configset, named like its collection. */
  private static List<Path> listConfigsets(Path root) throws Exception {
    List<Path> found = new ArrayList<>();
    try (Stream<Path> children = Files.list(root)) {
      children.filter(p -> Files.isRegularFile(p.resolve("conf/solrconfig.xml")))
          .sorted()
          .forEach(found::add);
    }
    if (found.isEmpty()) {
      throw new IllegalStateException("no configsets (folders with conf/solrconfig.xml) in " + root);
    }
    return found;
  }

  private static void stop(MiniSolrCloudCluster cluster) {
    try {
      cluster.shutdown();
    } catch (Exception e) {
      System.err.println("error while stopping Solr: " + e);
    }
  }
}
