/*
 * Starts a real Solr 9 (SolrCloud, embedded ZooKeeper) on 127.0.0.1 from the jars that
 * solr/local/pom.xml fetches (9.8.1, or 9.10.1: the class path says which), and creates a
 * collection per configset of solr/configsets (FileShare, VectorMain, AnswerCache...), the same
 * configsets docker-compose.yml uploads to the official solr image. Several nodes are several
 * processes (solr.sh starts them), so that one can fail alone.
 *
 * Run as a single-file source program (no build step):
 *   java -cp 'solr/local/lib/*' solr/local/SolrLauncher.java --port 8983 --dir .solr-data \
 *        --configsets solr/configsets
 *
 * A configset whose folder holds a file `variant-of` (VectorMainQuantized: "VectorMain") is
 * uploaded but makes no collection of its own: it is another configset for the collection that
 * file names, chosen with --configset COLLECTION=CONFIGSET (solr.sh --vectors quantized) when
 * that collection is created. An existing collection keeps the configset it was made with; one
 * asked for another is refused (its index would mix both).
 *
 * It prints "ZK READY <address>" once ZooKeeper runs (for joining nodes), "SOLR READY <base url>"
 * once both collections answer, and stops cleanly on SIGTERM.
 * Data in --dir survives a restart on the same port.
 *
 * A secured Solr, as organisations run it:
 *   --security FILE  Solr's security.json (BasicAuth, rule-based authorization...), put in
 *                    ZooKeeper once the collections exist; "SOLR READY" waits until an anonymous
 *                    request is refused. A restart keeps it (the collections are then left as
 *                    they are: the launcher has no credentials).
 *   --tls DIR        Jetty serves https: DIR/solr.p12 (the node's key and certificate),
 *                    DIR/trust.p12 (the CA), DIR/password (both stores'), and DIR/client-auth
 *                    if clients must show a certificate the CA signed; the cluster's urlScheme
 *                    is https, and the nodes talk to each other with the same stores.
 *   ZooKeeper ACLs: Solr's own system properties in SOLR_JAVA_OPTS (zkACLProvider,
 *                    zkCredentialsProvider, zkDigestUsername...), read by every ZooKeeper client
 *                    of the process, the launcher's included.
 */
import java.net.HttpURLConnection;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.solr.client.solrj.SolrRequest;
import org.apache.solr.client.solrj.embedded.SSLConfig;
import org.apache.solr.client.solrj.impl.CloudSolrClient;
import org.apache.solr.client.solrj.request.CollectionAdminRequest;
import org.apache.solr.client.solrj.request.GenericSolrRequest;
import org.apache.solr.cloud.MiniSolrCloudCluster;
import org.apache.solr.common.cloud.ClusterProperties;
import org.apache.solr.common.cloud.SolrZkClient;
import org.apache.solr.common.params.ModifiableSolrParams;
import org.apache.solr.common.util.Utils;
import org.apache.solr.embedded.JettyConfig;
import org.apache.solr.embedded.JettySolrRunner;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.data.Stat;

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
          <str name="zkCredentialsProvider">${zkCredentialsProvider:org.apache.solr.common.cloud.DefaultZkCredentialsProvider}</str>
          <str name="zkACLProvider">${zkACLProvider:org.apache.solr.common.cloud.DefaultZkACLProvider}</str>
          <str name="zkCredentialsInjector">${zkCredentialsInjector:org.apache.solr.common.cloud.DefaultZkCredentialsInjector}</str>
          <int name="leaderVoteWait">1000</int>
        </solrcloud>
        <shardHandlerFactory name="shardHandlerFactory" class="HttpShardHandlerFactory">
          <int name="socketTimeout">60000</int>
          <int name="connTimeout">5000</int>
        </shardHandlerFactory>
      </solr>
      """;

  /**
   * The first node (no --join) starts ZooKeeper, waits for --nodes live nodes, then creates the
   * collections with --shards and --replicas; a joining node (--join ZK_ADDRESS --node K) only
   * runs a Solr node of the cluster, in DIR/node<K>.
   */
  record Options(
      int port, Path dir, Path configsets, int nodes, int shards, int replicas, String join,
      int node, Path security, Path tls, Map<String, String> chosen) {
    static Options parse(String[] args) {
      int port = 8983, nodes = 1, shards = 1, replicas = 1, node = 1;
      Path dir = Path.of(".solr-data");
      Path configsets = Path.of("solr/configsets");
      String join = null;
      Path security = null, tls = null;
      Map<String, String> chosen = new TreeMap<>();
      for (int i = 0; i < args.length; i++) {
        String value = i + 1 < args.length ? args[i + 1] : null;
        switch (args[i]) {
          case "--port" -> { port = Integer.parseInt(value); i++; }
          case "--dir" -> { dir = Path.of(value); i++; }
          case "--configsets" -> { configsets = Path.of(value); i++; }
          case "--nodes" -> { nodes = Integer.parseInt(value); i++; }
          case "--shards" -> { shards = Integer.parseInt(value); i++; }
          case "--replicas" -> { replicas = Integer.parseInt(value); i++; }
          case "--join" -> { join = value; i++; }
          case "--node" -> { node = Integer.parseInt(value); i++; }
          case "--security" -> { security = Path.of(value).toAbsolutePath(); i++; }
          case "--tls" -> { tls = Path.of(value).toAbsolutePath(); i++; }
          case "--configset" -> {
            String[] pair = value == null ? new String[0] : value.split("=", 2);
            if (pair.length != 2 || pair[0].isBlank() || pair[1].isBlank()) {
              throw new IllegalArgumentException("--configset takes COLLECTION=CONFIGSET");
            }
            chosen.put(pair[0], pair[1]);
            i++;
          }
          default -> throw new IllegalArgumentException("unknown option " + args[i]
              + " (use --port N --dir PATH --configsets PATH --nodes N --shards S --replicas R"
              + " [--configset COLLECTION=CONFIGSET], or --join ZK_ADDRESS --node K --port N"
              + " --dir PATH; --security FILE, --tls DIR)");
        }
      }
      if (nodes < 1 || shards < 1 || replicas < 1 || node < 1) {
        throw new IllegalArgumentException("--nodes, --shards, --replicas and --node are >= 1");
      }
      if (replicas > nodes) {
        throw new IllegalArgumentException("--replicas " + replicas + " needs at least as many"
            + " nodes (--nodes " + nodes + "): two copies of a shard on one node protect nothing");
      }
      return new Options(port, dir.toAbsolutePath(), configsets.toAbsolutePath(), nodes, shards,
          replicas, join, node, security, tls, Map.copyOf(chosen));
    }
  }

  public static void main(String[] args) throws Exception {
    Options options = Options.parse(args);
    try {
      if (options.join() != null) {
        runNode(options);
      } else {
        runCluster(options);
      }
    } catch (Exception e) {
      // the cluster's threads would keep the process alive, start-up failed: say why and end
      // (the shutdown hook stops what was started)
      e.printStackTrace(System.out);
      System.out.println("SOLR FAILED " + e);
      System.out.flush();
      System.exit(1);
    }
  }

  /** A further node of a running cluster: Solr on --port, registered in --join's ZooKeeper. */
  private static void runNode(Options options) throws Exception {
    JettySolrRunner node = nodeRunner(options, options.join());
    node.start();
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      try {
        node.stop();
      } catch (Exception e) {
        System.err.println("error while stopping Solr node: " + e);
      }
    }, "solr-launcher-stop"));
    System.out.println("SOLR NODE READY " + node.getBaseUrl());
    System.out.flush();
    Thread.currentThread().join();
  }

  private static void runCluster(Options options) throws Exception {
    long started = System.nanoTime();
    List<Path> configsets = listConfigsets(options.configsets());
    Map<String, Path> collections = collectionConfigsets(configsets, options.chosen());

    JettyConfig jetty = jettyConfig(options);
    // The cluster starts ZooKeeper only; the node is started here so that an existing node
    // folder (a restart) is reused instead of refused.
    MiniSolrCloudCluster cluster = new MiniSolrCloudCluster(0, options.dir(), SOLR_XML, jetty);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> stop(cluster), "solr-launcher-stop"));
    String zkAddress = cluster.getZkServer().getZkAddress();
    // a ZooKeeper client of its own: the cluster's needs a running node first
    SolrZkClient zk =
        new SolrZkClient.Builder().withUrl(zkAddress).withTimeout(30, TimeUnit.SECONDS).build();
    if (options.tls() != null) {
      new ClusterProperties(zk).setClusterProperty("urlScheme", "https");
    }
    forgetDeadNodes(zk);
    boolean secured = isSecured(zk);
    if (!secured) {
      refuseAnotherConfigset(zk, options.chosen()); // before any node starts: at once
    }
    System.out.println("ZK READY " + zkAddress);
    System.out.flush();
    cluster.startJettySolrRunner(nodeRunner(options, zkAddress));
    cluster.getZkStateReader().waitForLiveNodes(300, TimeUnit.SECONDS,
        (before, live) -> live.size() >= options.nodes());

    CloudSolrClient client = cluster.getSolrClient();
    Set<String> existing =
        secured ? Set.of() : Set.copyOf(CollectionAdminRequest.listCollections(client));
    for (Path configset : secured ? List.<Path>of() : configsets) {
      cluster.uploadConfigSet(configset.resolve("conf"), configset.getFileName().toString());
    }
    List<String> made = new ArrayList<>();
    for (Map.Entry<String, Path> entry : secured ? Map.<String, Path>of().entrySet()
        : collections.entrySet()) {
      String name = entry.getKey();
      String configName = entry.getValue().getFileName().toString();
      if (existing.contains(name)) {
        // it keeps the configset it was made of (refuseAnotherConfigset: none other was asked)
        configName = client.getClusterState().getCollection(name).getConfigName();
        CollectionAdminRequest.reloadCollection(name).process(client);
      } else {
        client.request(createCollection(name, entry.getValue(), options));
      }
      cluster.waitForActiveCollection(name, 120, TimeUnit.SECONDS);
      made.add(configName.equals(name) ? name : name + " (" + configName + ")");
    }
    if (secured) {
      made.addAll(collections.keySet()); // left as they are: the launcher has no credentials
    }

    String url = cluster.getJettySolrRunner(0).getBaseUrl().toString();
    if (options.security() != null && !secured) {
      secure(zk, options.security(), url);
    }
    zk.close();
    long millis = (System.nanoTime() - started) / 1_000_000;
    System.out.println("SOLR READY " + url + " (" + millis + " ms, " + options.nodes()
        + " node(s), collections " + made + ", Solr "
        + org.apache.solr.client.api.util.SolrVersion.LATEST + ")");
    System.out.flush();
    Thread.currentThread().join();
  }

  private static JettyConfig jettyConfig(Options options) throws Exception {
    JettyConfig.Builder builder = JettyConfig.builder().setPort(options.port()).setContext("/solr");
    if (options.tls() != null) {
      // HTTP/1.1 over TLS, for Solr's own clients too (solr.http1): its test-mode TLS
      // connector offers HTTP/2 alone, which clients such as curl or httpx do not speak
      System.setProperty("solr.http1", "true");
      builder.withSSLConfig(sslConfig(options.tls())).useOnlyHttp1(true);
    }
    return builder.build();
  }

  /** Jetty's TLS from DIR (see the top), and the same stores for the node's own clients. */
  private static SSLConfig sslConfig(Path tls) throws Exception {
    String password = Files.readString(tls.resolve("password")).strip();
    String keyStore = tls.resolve("solr.p12").toString();
    String trustStore = tls.resolve("trust.p12").toString();
    System.setProperty("javax.net.ssl.keyStore", keyStore);
    System.setProperty("javax.net.ssl.keyStorePassword", password);
    System.setProperty("javax.net.ssl.keyStoreType", "PKCS12");
    System.setProperty("javax.net.ssl.trustStore", trustStore);
    System.setProperty("javax.net.ssl.trustStorePassword", password);
    System.setProperty("javax.net.ssl.trustStoreType", "PKCS12");
    // JettySolrRunner builds its TLS connector only in its "test mode" (otherwise: plain http)
    System.setProperty("jetty.testMode", "true");
    boolean clientAuth = Files.exists(tls.resolve("client-auth"));
    return new SSLConfig(true, clientAuth, keyStore, password, trustStore, password);
  }

  /**
   * A collection that exists keeps the configset it was made of: one asked for another is
   * refused (its index would mix both), read from ZooKeeper before a node starts.
   */
  private static void refuseAnotherConfigset(SolrZkClient zk, Map<String, String> chosen)
      throws Exception {
    for (Map.Entry<String, String> choice : chosen.entrySet()) {
      String path = "/collections/" + choice.getKey();
      if (!zk.exists(path, true)) {
        continue;
      }
      // Solr 9 keeps it in the collection's state.json (older ones: in its own znode)
      Object has = null;
      if (zk.exists(path + "/state.json", true)) {
        Object state = ((Map<?, ?>) Utils.fromJSON(
            zk.getData(path + "/state.json", null, null, true))).get(choice.getKey());
        has = state instanceof Map<?, ?> collection ? collection.get("configName") : null;
      }
      if (has == null) {
        byte[] data = zk.getData(path, null, null, true);
        has = data == null || data.length == 0 ? null
            : ((Map<?, ?>) Utils.fromJSON(data)).get("configName");
      }
      if (has != null && !choice.getValue().equals(has)) {
        throw new IllegalStateException("collection " + choice.getKey() + " exists with"
            + " configset " + has + ", not " + choice.getValue() + ": a configset is chosen when"
            + " its collection is made (delete " + choice.getKey() + ", or start with another"
            + " --dir)");
      }
    }
  }

  /** Whether ZooKeeper already holds a security.json with rules (a secured restart). */
  /**
   * A restart after a kill finds the killed node's ephemeral entries (its live node, its roles)
   * in ZooKeeper's snapshot, their session not yet expired: no node has joined this ZooKeeper
   * yet, so each is a dead node's, and the restarted node, under the same name, would be
   * refused.
   */
  private static void forgetDeadNodes(SolrZkClient zk) throws Exception {
    for (String root : List.of("/live_nodes", "/node_roles")) {
      forgetEphemeral(zk, root);
    }
  }

  private static void forgetEphemeral(SolrZkClient zk, String path) throws Exception {
    Stat stat = zk.exists(path, null, true);
    if (stat == null) {
      return;
    }
    if (stat.getEphemeralOwner() != 0) {
      zk.delete(path, -1, true);
      return;
    }
    for (String child : zk.getChildren(path, null, true)) {
      forgetEphemeral(zk, path + "/" + child);
    }
  }

  private static boolean isSecured(SolrZkClient zk) throws Exception {
    if (!zk.exists("/security.json", true)) {
      return false;
    }
    byte[] data = zk.getData("/security.json", null, null, true);
    return data != null && new String(data, StandardCharsets.UTF_8).contains("authentication");
  }

  /** security.json into ZooKeeper, then until the node refuses an anonymous request. */
  private static void secure(SolrZkClient zk, Path security, String url) throws Exception {
    byte[] json = Files.readAllBytes(security);
    if (zk.exists("/security.json", true)) {
      zk.setData("/security.json", json, -1, true);
    } else {
      zk.create("/security.json", json, CreateMode.PERSISTENT, true);
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (System.nanoTime() < deadline) {
      HttpURLConnection probe =
          (HttpURLConnection) URI.create(url + "/admin/info/system").toURL().openConnection();
      int status = probe.getResponseCode();
      probe.disconnect();
      if (status == 401) {
        return;
      }
      Thread.sleep(200);
    }
    throw new IllegalStateException("Solr did not take security.json within 60 s");
  }

  /** Node K's Solr in DIR/node<K> (its solr.xml written there), for ZooKeeper at zkAddress. */
  private static JettySolrRunner nodeRunner(Options options, String zkAddress) throws Exception {
    Path nodeDir = Files.createDirectories(options.dir().resolve("node" + options.node()));
    Files.writeString(nodeDir.resolve("solr.xml"), SOLR_XML);
    Properties nodeProperties = new Properties();
    nodeProperties.setProperty("zkHost", zkAddress);
    return new JettySolrRunner(nodeDir.toString(), nodeProperties, jettyConfig(options));
  }

  /**
   * The collections to have, each with the configset it is made with: one per configset that is
   * no variant (named like it), unless `chosen` names a variant of it (a configset whose file
   * `variant-of` names that collection).
   */
  private static Map<String, Path> collectionConfigsets(
      List<Path> configsets, Map<String, String> chosen) throws Exception {
    Map<String, Path> byName = new LinkedHashMap<>();
    Map<String, String> variantOf = new LinkedHashMap<>();
    for (Path configset : configsets) {
      String name = configset.getFileName().toString();
      byName.put(name, configset);
      Path marker = configset.resolve("variant-of");
      if (Files.isRegularFile(marker)) {
        String of = Files.readAllLines(marker).stream().map(String::strip)
            .filter(line -> !line.isEmpty() && !line.startsWith("#")).findFirst().orElse("");
        variantOf.put(name, of);
      }
    }
    Map<String, Path> collections = new LinkedHashMap<>();
    for (Path configset : configsets) {
      String name = configset.getFileName().toString();
      if (!variantOf.containsKey(name)) {
        collections.put(name, configset);
      }
    }
    for (Map.Entry<String, String> choice : chosen.entrySet()) {
      String collection = choice.getKey(), configName = choice.getValue();
      if (!collections.containsKey(collection)) {
        throw new IllegalArgumentException("--configset " + collection + "=" + configName
            + ": no collection " + collection + " (collections: " + collections.keySet() + ")");
      }
      if (!configName.equals(collection) && !collection.equals(variantOf.get(configName))) {
        List<String> offered = variantOf.entrySet().stream()
            .filter(e -> e.getValue().equals(collection)).map(Map.Entry::getKey).toList();
        throw new IllegalArgumentException("--configset " + collection + "=" + configName
            + ": " + collection + " is made of its own configset or of a variant of it "
            + offered);
      }
      collections.put(collection, byName.get(configName));
    }
    return collections;
  }

  /**
   * The Collections API CREATE, with the shape asked for and the configset's own creation
   * parameters (collection.properties beside conf/, e.g. VectorMain's router.field), the file
   * solr/docker/init-collections.sh reads too.
   */
  private static GenericSolrRequest createCollection(String name, Path configset, Options options)
      throws Exception {
    ModifiableSolrParams params = new ModifiableSolrParams();
    params.set("action", "CREATE");
    params.set("name", name);
    params.set("collection.configName", configset.getFileName().toString());
    params.set("numShards", options.shards());
    params.set("replicationFactor", options.replicas());
    Path extra = configset.resolve("collection.properties");
    if (Files.isRegularFile(extra)) {
      Properties properties = new Properties();
      try (var reader = Files.newBufferedReader(extra)) {
        properties.load(reader);
      }
      properties.stringPropertyNames().forEach(key -> params.set(key, properties.getProperty(key)));
    }
    return new GenericSolrRequest(SolrRequest.METHOD.POST, "/admin/collections", params);
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
